"""A webhook subscriber on loopback, as a real one would be: it verifies every delivery with
`standardwebhooks` and records what arrives, and it can misbehave on demand (fail, refuse
connections, answer too late, trickle an answer's body, never answer), so tests can watch
the service's deliveries.
"""

import http.server
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from standardwebhooks import Webhook
from standardwebhooks.webhooks import WebhookVerificationError

#: A secret in the Standard Webhooks form (`whsec_` and base64), for tests to configure.
SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
#: Seconds between two bytes of a trickled body.
TRICKLE_SECONDS = 0.1
#: The body of an answer that trickles: 10 s of it.
TRICKLED_BODY = b"ok" * 50


@dataclass(frozen=True)
class Delivery:
    """A delivery the receiver acknowledged (answered 2xx), its signature verified."""

    webhook_id: str
    event: dict
    received: float
    """`time.time()` when the whole body had arrived."""
    path: str
    """The request's target: the URL's path and query."""
    authorization: str | None
    """The `Authorization` header it came with, if any."""


class WebhookReceiver:
    """Listens on 127.0.0.1 until `close`; use it as a context manager.

    It answers each verified delivery as it was told when the delivery arrived (200 unless
    told otherwise), a delivery whose signature does not verify with 400 (and counts it in
    `unverified`), and nothing at all while `hold` is set: then the sender's timeout is what
    ends its attempt. A held delivery is answered on `release` as it would have been when it
    arrived: one held while the receiver answered 500 is never recorded, however the receiver
    answers by then, so a test can tell an attempt cut off (by a kill, a stop) from a
    delivery.
    """

    def __init__(self, secret: str = SECRET) -> None:
        self._webhook = Webhook(secret)
        self._changed = threading.Condition()
        self.deliveries: list[Delivery] = []
        #: Deliveries whose signature verified, acknowledged or not.
        self.attempts = 0
        self.unverified = 0
        #: Connections accepted: fewer than deliveries when senders keep theirs.
        self.connections = 0
        self.status = 200
        self.delay = 0.0
        self.trickle = False
        self._released = threading.Event()
        self._released.set()
        self._closed = threading.Event()
        self._server = self._listen(0)
        self.port = self._server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}/hooks"

    # What the receiver does with the next deliveries.

    def answer(self, status: int, delay: float = 0.0, trickle: bool = False) -> None:
        """Answer `status`, `delay` seconds after the body has arrived (too late, if long).

        With `trickle`, the answer's head comes at once, and then its body (`TRICKLED_BODY`)
        a byte every `TRICKLE_SECONDS`: bytes keep coming, and the whole takes far longer than
        a sender's timeout.
        """
        self.status, self.delay, self.trickle = status, delay, trickle

    def hold(self) -> None:
        """Keep every delivery waiting, unanswered, until `release`."""
        self._released.clear()

    def release(self) -> None:
        self._released.set()

    def refuse(self) -> None:
        """Stop listening: connections to the port are refused until `listen`."""
        self._server.shutdown()
        self._server.server_close()

    def listen(self) -> None:
        """Listen again, on the same port."""
        self._server = self._listen(self.port)

    # What arrived.

    def events(self) -> dict[str, dict]:
        """Each event received, by `webhook-id`: the de-duplication a subscriber does."""
        with self._changed:
            return {delivery.webhook_id: delivery.event for delivery in self.deliveries}

    def wait_for(self, condition: Callable[[list[Delivery]], bool], timeout: float) -> bool:
        """Wait until `condition(deliveries)` holds; tell whether it did within `timeout`."""
        with self._changed:
            return self._changed.wait_for(lambda: condition(self.deliveries), timeout)

    def wait_for_ids(self, webhook_ids: Iterable[str], timeout: float) -> bool:
        wanted = set(webhook_ids)
        return self.wait_for(lambda got: wanted <= {d.webhook_id for d in got}, timeout)

    def close(self) -> None:
        self._closed.set()
        self._released.set()
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> "WebhookReceiver":
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def _listen(self, port: int) -> http.server.ThreadingHTTPServer:
        server = http.server.ThreadingHTTPServer(("127.0.0.1", port), self._handler())
        server.daemon_threads = True
        threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
        return server

    def _receive(self, path: str, body: bytes, headers: dict[str, str]) -> tuple[int, bool]:
        """Verify and record a delivery; give the status to answer it with, and whether its
        body trickles.

        The answer is the one the receiver was told to give when the delivery arrived.
        """
        try:
            event = self._webhook.verify(body, headers)
        except WebhookVerificationError:
            with self._changed:
                self.unverified += 1
                self._changed.notify_all()
            return 400, False
        received = time.time()
        with self._changed:
            self.attempts += 1
            status, delay, trickle = self.status, self.delay, self.trickle
            self._changed.notify_all()
        self._released.wait()
        if self._closed.is_set():
            return 503, False
        # The delay is the subscriber being slow, not the test waiting for something.
        self._closed.wait(delay)
        if 200 <= status < 300:
            with self._changed:
                self.deliveries.append(
                    Delivery(
                        headers["webhook-id"], event, received, path, headers.get("authorization")
                    )
                )
                self._changed.notify_all()
        return status, trickle

    def _trickle(self, answer: bytes, output) -> None:
        """Write `answer` a byte every `TRICKLE_SECONDS`, until it is all sent, the sender has
        gone, or the receiver closes."""
        for byte in answer:
            if self._closed.wait(TRICKLE_SECONDS):
                return
            try:
                output.write(bytes([byte]))
            except OSError:
                return

    def _handler(self) -> type[http.server.BaseHTTPRequestHandler]:
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            # Keep-alive, as a real subscriber's server offers it.
            protocol_version = "HTTP/1.1"

            def setup(self):
                super().setup()
                with receiver._changed:
                    receiver.connections += 1

            def do_POST(self):
                length = int(self.headers.get("Content-Length", 0))
                body = self.rfile.read(length)
                if len(body) < length:
                    # Its sender went away mid-body (killed as it sent): as a subscriber's
                    # server would, it takes no delivery, and answers nothing.
                    self.close_connection = True
                    return
                headers = {name.lower(): value for name, value in self.headers.items()}
                status, trickle = receiver._receive(self.path, body, headers)
                try:
                    self.send_response(status)
                    self.send_header("Content-Length", str(len(TRICKLED_BODY) if trickle else 0))
                    self.end_headers()
                except (BrokenPipeError, ConnectionResetError):
                    # Its sender gave up waiting (its timeout) while the answer was held back.
                    self.close_connection = True
                    return
                if trickle:
                    self.close_connection = True
                    receiver._trickle(TRICKLED_BODY, self.wfile)

            def log_message(self, format, *args):
                """Quiet: pytest shows what a test asserts, not every request."""

        return Handler
