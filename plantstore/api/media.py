"""Request bodies are JSON, and JSON is UTF-8 (RFC 8259): which `Content-Type`s say so."""

import falcon

#: What a 415 answer tells the client to send; it never repeats what the client sent.
ACCEPTED = (
    "The body must be JSON: send 'Content-Type: application/json', with no charset or "
    "charset=utf-8."
)


def require_json(req, resp, resource, params) -> None:
    """Answer 415 unless the body's `Content-Type` is JSON in UTF-8; a body without one is JSON.

    A `falcon.before` hook for responders that read the body. Falcon picks a media handler by
    the type as it is written, so `APPLICATION/JSON` would find none, though media types are
    case-insensitive (RFC 9110, section 8.3.1); and it ignores the charset, so a body sent as
    `charset=latin-1` would be decoded as UTF-8. So the header is judged here, parsed by Falcon's
    own `parse_header`, and an accepted one is then written as the JSON handler's key, for
    `req.get_media()` to find that handler.
    """
    if not req.content_type or req.content_type == falcon.MEDIA_JSON:
        return
    media_type, parameters = falcon.parse_header(req.content_type)
    charset = parameters.get("charset", "utf-8")
    if (
        media_type.lower() != falcon.MEDIA_JSON
        or charset.lower() != "utf-8"
        or _repeats_a_parameter(req.content_type)
    ):
        raise falcon.HTTPUnsupportedMediaType(title="Unsupported Media Type", description=ACCEPTED)
    req.content_type = falcon.MEDIA_JSON


def _repeats_a_parameter(content_type: str) -> bool:
    """Whether a parameter is named twice (`charset=latin-1; charset=utf-8`): which one counts
    is anybody's guess, and `parse_header` keeps the last."""
    names = [part.partition("=")[0].strip().lower() for part in content_type.split(";")[1:]]
    return len(names) != len(set(names))
