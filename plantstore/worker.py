"""gunicorn's gthread worker, answering what gunicorn refuses itself the way the app answers.

gunicorn reads each request before the app sees it, and answers those it cannot take itself
(a malformed request line or header, a line or headers over the limits, an unknown
`Transfer-Encoding`, a path outside the proxy's SCRIPT_NAME). Its worker does so in one method,
`handle_error`, which this worker overrides: gunicorn would write a page of HTML, quote what
the client sent (a header line may hold a token) in the answer and the error log, answer 500
for the client's SCRIPT_NAME, and leave the refusal without a request id or an access-log line.
"""

import http
from dataclasses import dataclass, field
from datetime import datetime

from gunicorn import util
from gunicorn.http.message import Request
from gunicorn.workers.gthread import ThreadWorker

from plantstore.errors import error_body
from plantstore.middleware import request_id
from plantstore.refusals import refusal


@dataclass
class _Refusal:
    """An answer written by the worker, as gunicorn's access log reads an answer."""

    status: int
    headers: list[tuple[str, str]]
    sent: int = field(default=0)


class EdgeWorker(ThreadWorker):
    def handle_error(self, req, client, addr, exc):
        """Refuse with the `Error` body, an `X-Request-ID` and an access-log line.

        `req` is None when the request line or headers could not be read; gunicorn's exception
        for a header then carries what was read of the request (for others, `req` is a string).
        """
        started = datetime.now()
        if req is None and isinstance(getattr(exc, "req", None), Request):
            req = exc.req
        status, message = refusal(exc)
        rid = request_id(_header(req, "X-REQUEST-ID"))
        peer = addr[0] if isinstance(addr, tuple) else addr or ""
        if status == 500:
            self.log.exception("request_id=%s error handling a request", rid)
        else:
            self.log.warning("request_id=%s invalid request from %s: %s", rid, peer, message)

        body = error_body(status, message)
        head = (
            f"HTTP/1.1 {status} {http.HTTPStatus(status).phrase}\r\n"
            "Connection: close\r\n"
            "Content-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n"
            f"X-Request-ID: {rid}\r\n\r\n"
        )
        answer = _Refusal(status, [("X-Request-ID", rid)])
        try:
            util.write_nonblock(client, head.encode("latin-1") + body)
            answer.sent = len(body)
        except OSError:
            self.log.debug("request_id=%s the refusal could not be sent", rid)
        self.log.access(answer, req or [], _environ(req, peer), datetime.now() - started)


def _environ(req, peer: str) -> dict[str, str]:
    """What the access log reads of a refused request: its method and path when known."""
    return {
        "REMOTE_ADDR": peer,
        "REQUEST_METHOD": getattr(req, "method", None) or "-",
        "PATH_INFO": getattr(req, "path", None) or "-",
        "RAW_URI": "-",
        "SERVER_PROTOCOL": "-",
    }


def _header(req, name: str) -> str | None:
    """The value of the request's header `name` (upper case, as gunicorn keeps it), if any."""
    for header, value in getattr(req, "headers", ()):
        if header == name:
            return value
    return None
