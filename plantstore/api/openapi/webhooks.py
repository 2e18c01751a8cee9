"""The events the service sends to `PLANTSTORE_WEBHOOK_URLS`, signed, as `POST`s: OpenAPI 3.1's
`webhooks`, which apispec does not write."""

#: The Standard Webhooks headers every event is sent with, described once as parameters.
WEBHOOK_HEADERS = {
    "webhook-id": "The event's id, `msg_` and 32 hex digits: the same on every attempt and for "
    "every URL, so a subscriber can tell a repeat.",
    "webhook-timestamp": "The attempt's time, in seconds since the epoch; signed, so that a "
    "subscriber can refuse an old one replayed.",
    "webhook-signature": "`v1,` and the base64 HMAC-SHA256 of `{webhook-id}.{webhook-timestamp}."
    "{body}` under the secret (`PLANTSTORE_WEBHOOK_SECRET`), as Standard Webhooks signs it.",
}

#: The events, by the name the document gives each under `webhooks`: the schema of the body,
#: a summary and a description.
WEBHOOKS = {
    "plantCreated": (
        "PlantCreated",
        "A plant was kept",
        "Sent for each `POST /plants` that kept a new plant (not for an identical repeat, "
        "nor a 409), and each `PUT /plants/{id}` that made one; `data` is the `NewPlant`.",
    ),
    "plantUpdated": (
        "PlantUpdated",
        "A plant was replaced",
        "Sent for each `PUT /plants/{id}` that replaced a plant with another (not for one "
        "that stored the same plant again); `data` is the plant as it now is, with its id.",
    ),
    "plantDeleted": (
        "PlantDeleted",
        "A plant was deleted",
        "Sent for each `DELETE /plants/{id}` that deleted a plant; `data` holds its id.",
    ),
}


def webhooks() -> dict:
    """The document's `webhooks`: each event, as the `POST` a subscriber answers."""
    return {
        name: {
            "post": {
                "summary": summary,
                "operationId": name,
                "description": f"{description} Retried until a 2xx answer, or given up "
                "`PLANTSTORE_WEBHOOK_GIVE_UP_AFTER` seconds after the event.",
                "security": [],
                "parameters": [
                    {"$ref": f"#/components/parameters/{header}"} for header in WEBHOOK_HEADERS
                ],
                "requestBody": {
                    "required": True,
                    "content": {
                        "application/json": {"schema": {"$ref": f"#/components/schemas/{schema}"}}
                    },
                },
                "responses": {
                    "2XX": {"description": "Acknowledged: the event is not sent again."},
                    "default": {
                        "description": "Not acknowledged: sent again later, with backoff. So "
                        "is an event not answered within `PLANTSTORE_WEBHOOK_TIMEOUT` seconds."
                    },
                },
            }
        }
        for name, (schema, summary, description) in WEBHOOKS.items()
    }
