"""Every failure, on every path and status, answers JSON: `{"error": <status>, "message": ...}`."""

import falcon
import orjson
from marshmallow import ValidationError

from plantstore.core.stores import CursorGone, StoreUnavailable

#: Seconds a client is told to wait before it tries again, when the store cannot serve.
RETRY_AFTER_SECONDS = 1


def error_body(status: int, message: str) -> bytes:
    """The `Error` document of an answer with this status."""
    return orjson.dumps({"error": status, "message": message})


def serialize_error(req, resp, exception: falcon.HTTPError) -> None:
    """Write the `Error` body, whatever the client's `Accept` says.

    Falcon's own serializer writes nothing when the client accepts neither JSON nor XML; a
    client of this API must always be able to read why it failed.
    """
    resp.content_type = falcon.MEDIA_JSON
    resp.data = error_body(exception.status_code, exception.description or exception.title)


def handle_validation_error(req, resp, ex: ValidationError, params) -> None:
    """Answer 400 naming each wrong field and why, e.g. `id: Not a valid integer.`

    By the field each message is about, as `normalized_messages` gives them: a schema's errors
    are so already, but one raised for a single field holds only its messages.
    """
    raise falcon.HTTPBadRequest(title="Bad Request", description=describe(ex.normalized_messages()))


def handle_store_unavailable(req, resp, ex: StoreUnavailable, params) -> None:
    """Answer 503 with a retry hint; why goes to the log, not to the client."""
    req.log_error(f"plantstore: store unavailable: {ex}\n")
    raise store_unavailable()


#: What a 410 tells a client that follows the feed from a cursor too old.
CURSOR_GONE = (
    "The events after this cursor are no longer kept: list the plants again (GET /plants), "
    "then follow the events after the Events-After that list answers."
)


def handle_cursor_gone(req, resp, ex: CursorGone, params) -> None:
    """Answer 410, as Kubernetes answers a watch from a version it no longer keeps: a client
    that went on as if nothing were missing would hold plants that no longer are."""
    raise falcon.HTTPGone(title="Gone", description=CURSOR_GONE)


def store_unavailable() -> falcon.HTTPServiceUnavailable:
    """The 503 of a store that cannot serve now; why is for the log, not for the client."""
    return falcon.HTTPServiceUnavailable(
        title="Service Unavailable",
        description="The store cannot serve right now; try again shortly.",
        retry_after=RETRY_AFTER_SECONDS,
    )


def describe(messages: dict[str, list[str]]) -> str:
    """Flatten marshmallow's messages into one line; `_schema` is the body as a whole."""
    return "; ".join(
        f"{'body' if field == '_schema' else field}: {' '.join(problems)}"
        for field, problems in messages.items()
    )
