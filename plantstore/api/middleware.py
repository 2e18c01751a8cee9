"""A bound on every body, read whole before any responder reads it."""

import io

import falcon


class BodyLimit:
    """Read the body whole, before any responder does: 413 over `max_bytes`, 400 if cut short.

    Falcon bounds reading by Content-Length and has no limit of its own. An announced length
    over the limit is refused before a byte is read. A chunked body has no Content-Length, so
    Falcon would read it as empty; where the server de-chunks it (gunicorn says so with
    `wsgi.input_terminated`), it is read here, at most one byte past the limit. And gunicorn
    hands on whatever part of a body came before the client closed: were that part valid JSON,
    an incomplete request (RFC 9112, section 6.3) would be served as a whole one.

    Reading fails when the client breaks the body: a malformed chunk or trailer, a close or a
    reset before its end. Either way it is the client's error, 400 (see `_read`).

    It runs in `process_resource`, after authentication, so no body is read for a client that
    is not let in, and none for a path that does not exist.
    """

    def __init__(self, max_bytes: int) -> None:
        self._max_bytes = max_bytes

    def process_resource(self, req, resp, resource, params):
        length = req.content_length
        if length is None:
            # No Content-Length: only a chunked body has bytes (RFC 9112, section 6.3), and only
            # a de-chunked one can be read. gunicorn says `wsgi.input_terminated` for every
            # request, so most (a GET, a DELETE) end here, with nothing to read.
            env = req.env
            if "HTTP_TRANSFER_ENCODING" not in env or not env.get("wsgi.input_terminated"):
                return
        elif length > self._max_bytes:
            raise self._too_large()
        body = _read(req.stream, self._max_bytes + 1 if length is None else length)
        if len(body) > self._max_bytes:
            raise self._too_large()
        if length is not None and len(body) < length:
            raise falcon.HTTPBadRequest(
                title="Incomplete body",
                description=f"The body ended after {len(body)} of its {length} bytes.",
            )
        req.stream = req.env["wsgi.input"] = io.BytesIO(body)
        req.env["CONTENT_LENGTH"] = str(len(body))

    def _too_large(self) -> falcon.HTTPContentTooLarge:
        return falcon.HTTPContentTooLarge(
            title="Content Too Large",
            description=f"The body may hold at most {self._max_bytes} bytes.",
        )


def _read(stream, size: int) -> bytes:
    """Read the body; a body whose reading fails half-way is the client's error, 400."""
    try:
        return stream.read(size)
    except Exception:
        # PEP 3333 names no exception for a `wsgi.input` that fails, so each server raises its
        # own: gunicorn a parse error of its own for a broken chunk, another when the client
        # closes before the end, an `OSError` when it resets. Nothing here but the read can
        # raise, and the read only fails on what the client sent (or did not).
        raise falcon.HTTPBadRequest(
            title="Broken body",
            description="The body is malformed, or the connection closed before its end.",
        ) from None
