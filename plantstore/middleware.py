"""Request plumbing: a request id on every answer, and a bound on every body."""

import io
import re
from random import getrandbits

import falcon

#: An incoming X-Request-ID is echoed only when it is this tame: safe in a header and a log line.
_SANE_REQUEST_ID = re.compile(r"[A-Za-z0-9._:@-]{1,128}")


class RequestId:
    """Give every answer an `X-Request-ID`: the client's own when sane, else a fresh one.

    gunicorn's access log reads it back from the answer (`%({x-request-id}o)s`). A fresh id
    needs to be unique, not secret: `random` (which reseeds in every forked worker) makes one in
    half the time `os.urandom` takes.
    """

    def process_request(self, req, resp):
        # Read from the WSGI environ: `req.get_header` costs ten times as much for a header
        # that is absent, as it mostly is.
        request_id = req.env.get("HTTP_X_REQUEST_ID")
        if request_id is None or not _SANE_REQUEST_ID.fullmatch(request_id):
            request_id = f"{getrandbits(128):032x}"
        resp.set_header("X-Request-ID", request_id)


class BodyLimit:
    """Answer 413 to a body over `max_bytes`, before any responder reads it.

    Falcon bounds reading by Content-Length and has no limit of its own. A chunked body has no
    Content-Length, so without help Falcon would read it as empty; where the server de-chunks it
    (gunicorn says so with `wsgi.input_terminated`), it is read here, at most one byte past the
    limit, and handed on with the Content-Length it turned out to have. A body with a
    Content-Length is read here too, so that one cut short of it is refused (400).

    It runs in `process_resource`, after authentication, so no body is read for a client that
    is not let in, and none for a path that does not exist.
    """

    def __init__(self, max_bytes: int) -> None:
        self._max_bytes = max_bytes

    def process_resource(self, req, resp, resource, params):
        length = req.content_length
        if length is None and req.env.get("wsgi.input_terminated"):
            body = req.stream.read(self._max_bytes + 1)
            length = len(body)
            req.stream = req.env["wsgi.input"] = io.BytesIO(body)
            req.env["CONTENT_LENGTH"] = str(length)
        elif length is not None and length <= self._max_bytes:
            _read_whole(req, length)
        if length is not None and length > self._max_bytes:
            raise falcon.HTTPContentTooLarge(
                title="Content Too Large",
                description=f"The body may hold at most {self._max_bytes} bytes.",
            )


def _read_whole(req, length: int) -> None:
    """Read a body of `length` bytes, and refuse it when the client stopped sending before.

    gunicorn hands on whatever part of the body came before the client closed; were that part
    valid JSON, an incomplete request (RFC 9112 section 6.3) would be served as a whole one.
    """
    body = req.stream.read(length)
    if len(body) < length:
        raise falcon.HTTPBadRequest(
            title="Incomplete body",
            description=f"The body ended after {len(body)} of its {length} bytes.",
        )
    req.stream = req.env["wsgi.input"] = io.BytesIO(body)
