"""gunicorn's gthread worker, made to do at the edge of the service what it says.

gunicorn reads each request, hands it to the app and writes the answer. Where it would say one
thing and do another, or hold a thread without end, this worker steps in, in the methods
gunicorn's workers are built from (nothing of gunicorn is replaced process-wide). It is a
worker class, not server hooks, because gunicorn has no hook for a request it refuses, nor
one between the app's return and the answer's head:

- `handle_error`, where gunicorn answers what it refuses itself (a malformed request line or
  header, a line or headers over the limits, an unknown `Transfer-Encoding`, a path outside
  the proxy's SCRIPT_NAME): the `Error` body, the status's own reason, a message in the
  service's words (gunicorn's quote what the client sent, and a header may hold a token), an
  `X-Request-ID` and an access-log line, as every other answer has.
- `handle_request`, around each request the app serves: the body must arrive within
  `body_timeout` seconds of the head, so a client stalled in its body frees its thread;
  `100 Continue` is sent when the app first reads the body, not before it decides 401 or 413;
  and a request of HTTP/1.2 to HTTP/1.9 is served, and answered, as HTTP/1.1 (RFC 9110,
  section 2.5) rather than with a status line of a version the server does not speak.
- `load_wsgi`, around the app: an answer says `Connection: close` whenever the connection
  closes after it, which is when the body was not read to its end. gunicorn would otherwise
  announce keep-alive, drain at most 64 KiB of the body, and close anyway. An app that
  cannot load is logged in the error log's format, not printed bare to stderr.
- after a refusal or an answer that closes the connection, the wait for the client to close
  too is done in the serving thread, not in the worker's main loop (see `_shut`).
"""

import contextlib
import http
import socket
import threading
import time
from dataclasses import dataclass
from datetime import datetime

from gunicorn import util
from gunicorn.arbiter import Arbiter
from gunicorn.http.body import ChunkedReader, LengthReader
from gunicorn.http.message import Request
from gunicorn.workers.gthread import ThreadWorker

from plantstore.api.errors import error_body
from plantstore.api.middleware import request_id
from plantstore.config import DEFAULT_BODY_TIMEOUT, ConfigError
from plantstore.operations.logs import current_request_id
from plantstore.refusals import refusal
from plantstore.stores import SchemaTooNew, StoreUnavailable


@dataclass
class _Refusal:
    """An answer written by the worker, as gunicorn's access log reads an answer."""

    status: int
    headers: list[tuple[str, str]]
    sent: int = 0


#: Seconds to wait for a client to close after the server did, as gunicorn's own close waits.
LINGER = 2.0


class EdgeWorker(ThreadWorker):
    """gunicorn's gthread worker, answering for gunicorn as the app does (see the module)."""

    #: gunicorn has no such setting: `plantstore.serving.settings` sets it (GUNICORN_BODY_TIMEOUT).
    body_timeout = DEFAULT_BODY_TIMEOUT

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # The request each thread serves, for the app's wrapper: a WSGI environ does not hold it.
        self._serving = threading.local()

    def load_wsgi(self):
        try:
            super().load_wsgi()
        except Exception as ex:
            # gunicorn's arbiter would log the traceback, then print the message to stderr
            # bare, outside the log's format. A reason the service words itself is one line;
            # anything else is a bug, whose traceback is wanted. Either way the master, told
            # the worker failed to boot, shuts down rather than start it again and again.
            if isinstance(ex, ConfigError | StoreUnavailable | SchemaTooNew):
                self.log.error("plantstore: this worker cannot start: %s", ex)
            else:
                self.log.exception("plantstore: this worker cannot start")
            raise SystemExit(Arbiter.WORKER_BOOT_ERROR) from None
        app = self.wsgi

        def app_closing_after_an_unread_body(environ, start_response):
            result = app(environ, start_response)
            req = self._serving.request
            if not _read_to_its_end(req.body):
                req.force_close()
            return result

        self.wsgi = app_closing_after_an_unread_body

    def handle_request(self, req, conn):
        """Serve `req` as HTTP/1.1 at most, its body read through a `_BodyArrival`."""
        req.version = min(req.version, (1, 1))
        unreader = req.unreader
        sock = unreader.sock
        # gunicorn would send 100 Continue as it hands the request to the app.
        arrival = _BodyArrival(sock, self.body_timeout, req._expected_100_continue)
        req._expected_100_continue = False
        unreader.sock = arrival
        self._serving.request = req
        try:
            keepalive = super().handle_request(req, conn)
        finally:
            unreader.sock = sock
        if not keepalive:
            # After a 408 there is nothing to wait for: everything the client sent was read
            # (it sent nothing in time), so shutting at once loses no answer to a reset.
            _shut(sock, linger=0 if arrival.timed_out else LINGER)
        return keepalive

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
        # The error log's lines carry the id of the request they concern.
        current_request_id.set(rid)
        try:
            if status == 500:
                self.log.exception("error handling a request")
            else:
                self.log.warning("invalid request from %s: %s", peer, message)

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
                self.log.debug("the refusal could not be sent")
            self.log.access(answer, req or [], _environ(req, peer), datetime.now() - started)
        finally:
            current_request_id.set("-")
        _shut(client, linger=LINGER)


def _environ(req, peer: str) -> dict[str, str]:
    """What the access log reads of a refused request: its method and path when known."""
    return {
        "REMOTE_ADDR": peer,
        "REQUEST_METHOD": getattr(req, "method", None) or "-",
        "PATH_INFO": getattr(req, "path", None) or "-",
        "RAW_URI": "-",
        "SERVER_PROTOCOL": "-",
    }


class _BodyArrival:
    """The client's socket as gunicorn reads a request body from it, through `recv`.

    Each read waits only for what is left of the time the body has, so a client that stalls
    or trickles makes the app's read raise `TimeoutError` (which the app answers 408); and the
    first read sends the `100 Continue` the client may be waiting for.
    """

    def __init__(self, sock, timeout: float, send_continue: bool) -> None:
        self._sock = sock
        self._deadline = time.monotonic() + timeout
        self._send_continue = send_continue
        self.timed_out = False

    def recv(self, size: int) -> bytes:
        if self._send_continue:
            self._send_continue = False
            self._sock.sendall(b"HTTP/1.1 100 Continue\r\n\r\n")
        left = self._deadline - time.monotonic()
        try:
            if left <= 0:
                raise TimeoutError("the request body did not arrive in time")
            self._sock.settimeout(left)
            return self._sock.recv(size)
        except TimeoutError:
            self.timed_out = True
            raise
        finally:
            self._sock.settimeout(None)


def _shut(sock, linger: float) -> None:
    """Shut the connection in the thread that served it, after up to `linger` s for the client.

    gunicorn closes a connection in its worker's main loop, gracefully (RFC 9112, section 9.6):
    it shuts its side, then reads what the client still sends until it closes too, for up to
    2 s, so that unread bytes do not make the kernel reset the connection before the client has
    read the answer. A client that never closes stalls every connection of the worker for that
    time, and a few of them keep the worker from its heartbeat until the master restarts it.
    Waiting here holds one thread instead; the connection is then shut both ways, so that the
    main loop's close has nothing left to wait for. (gunicorn's `util.close_graceful`, which
    does the same wait, would also close the socket under the main loop, which closes it next.)
    """
    try:
        sock.shutdown(socket.SHUT_WR)
        deadline = time.monotonic() + linger
        while (left := deadline - time.monotonic()) > 0:
            sock.settimeout(left)
            if not sock.recv(65536):
                break
    except OSError:
        pass
    finally:
        with contextlib.suppress(OSError):
            sock.settimeout(None)
            sock.shutdown(socket.SHUT_RDWR)


def _read_to_its_end(body) -> bool:
    """Whether gunicorn has read all of this request's body off the connection.

    A body is read with a length (Content-Length, or none: 0) or chunked; one whose reading
    failed is never at its end.
    """
    if body.failed:
        return False
    reader = body.reader
    if isinstance(reader, LengthReader):
        return reader.length == 0
    return isinstance(reader, ChunkedReader) and reader.parser is None


def _header(req, name: str) -> str | None:
    """The value of the request's header `name` (upper case, as gunicorn keeps it), if any."""
    for header, value in getattr(req, "headers", ()):
        if header == name:
            return value
    return None
