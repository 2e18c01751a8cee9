"""gunicorn's gthread worker, refusing what gunicorn refuses itself with the `Error` body.

gunicorn answers a request it cannot take (a malformed request line or header, headers or a
request line over the limits, a bad chunk) before the app sees it. It writes that answer with
`gunicorn.util.write_error`, the one function its workers call for it, as a page of HTML. This
worker has that function write the service's JSON `Error` instead, so that every answer a
client gets, from the app or from gunicorn, is one it can read.
"""

from gunicorn import util
from gunicorn.workers.gthread import ThreadWorker

from plantstore.errors import error_body


def write_error(sock, status_int: int, reason: str, mesg: str) -> None:
    """Write gunicorn's refusal as an `Error`, the way `gunicorn.util.write_error` writes HTML."""
    body = error_body(status_int, mesg or reason)
    head = (
        f"HTTP/1.1 {status_int} {reason}\r\n"
        "Connection: close\r\n"
        "Content-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    )
    util.write_nonblock(sock, head.encode("latin-1") + body)


class JsonErrorThreadWorker(ThreadWorker):
    def init_process(self):
        util.write_error = write_error
        super().init_process()
