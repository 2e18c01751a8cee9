"""One attempt to deliver an event to its subscriber: a signed POST, and what it came to."""

import time
from collections.abc import Callable
from contextlib import suppress
from datetime import UTC, datetime

import urllib3
from standardwebhooks import Webhook

from plantstore.core.stores import Delivery
from plantstore.webhooks.subscribers import Subscriber

#: An answer's body, read so that its connection can carry the next attempt, when it is no
#: longer than this; a longer one (or one of unknown length) is left unread, its connection
#: closed.
ANSWER_BYTES = 65536
#: Deliveries to one URL under way at once in a worker. Each URL has senders of its own, so a
#: slow or failing subscriber holds up its own deliveries, never another's.
SENDERS = 4


class Attempts:
    """Posts deliveries, each signed as it leaves, keeping a connection to each subscriber.

    Args:
        webhook: signs each attempt (Standard Webhooks).
        timeout: seconds an attempt gets to connect, and to be answered (see `post`).
        subscribers: how many there are: each has `SENDERS` senders, which may all post to one
            host at once.
        clock: the time, as `time.time()` gives it, which each attempt is signed with.
    """

    def __init__(
        self, webhook: Webhook, timeout: float, subscribers: int, clock: Callable[[], float]
    ) -> None:
        self._webhook = webhook
        self._timeout = timeout
        self._clock = clock
        # Keep-alive per subscriber's host, a connection for each sender: URLs on one host
        # share its pool, which then holds one for each of their senders.
        self._http = urllib3.PoolManager(
            num_pools=max(10, subscribers), maxsize=SENDERS * max(1, subscribers)
        )

    def post(self, subscriber: Subscriber, delivery: Delivery) -> str | None:
        """Post the delivery once to its subscriber, signed now; None when acknowledged (2xx),
        else why not.

        urllib3's timeout bounds connecting, and each read of the answer's status line and
        headers, to the attempt's `timeout`: a subscriber that never connects, or connects and
        never answers, fails the attempt then. The status is the answer; the body is read
        only by the attempt's deadline, checked between reads, so a body that trickles ends
        the attempt at its timeout (one that stops coming, a read's timeout later), and an
        attempt that gets no trickled head takes at most twice its timeout.

        Left to the per-read timeout: a status line and headers trickled a byte at a time,
        each byte within the timeout, hold the attempt (and a sender) for as long as they
        come. Its claim then runs out and the delivery may be sent again: at least once.

        Why not never holds an exception's message, which may hold the URL.
        """
        deadline = time.monotonic() + self._timeout
        now = self._clock()
        headers = {
            **subscriber.headers,
            "Content-Type": "application/json",
            "webhook-id": delivery.webhook_id,
            "webhook-timestamp": str(int(now)),
            "webhook-signature": self._webhook.sign(
                delivery.webhook_id, datetime.fromtimestamp(now, UTC), delivery.body.decode()
            ),
        }
        try:
            # No retries and no redirects here: a failure is retried by the outbox, with
            # backoff, and a redirect is not an acknowledgement. The status is the answer:
            # the body is read, if at all, only to keep the connection.
            response = self._http.request(
                "POST",
                subscriber.url,
                body=delivery.body,
                headers=headers,
                timeout=urllib3.Timeout(connect=self._timeout, read=self._timeout),
                retries=False,
                redirect=False,
                preload_content=False,
            )
        except urllib3.exceptions.NewConnectionError:
            return "could not connect"
        except urllib3.exceptions.TimeoutError:
            return "timed out"
        except urllib3.exceptions.HTTPError as ex:
            return type(ex).__name__
        _let_go(response, deadline)
        if 200 <= response.status < 300:
            return None
        return f"answered {response.status}"

    def close(self) -> None:
        """Close every connection kept."""
        self._http.clear()


def _let_go(response: urllib3.BaseHTTPResponse, deadline: float) -> None:
    """Give the answer's connection back for the next attempt: with the rest of its body read,
    if it says it is short and all of it comes by `deadline` (`time.monotonic()`); else closed.

    `read1` returns what has come, so the deadline is checked after each piece of a body that
    trickles; a piece that does not come at all ends at urllib3's read timeout.
    """
    short = response.length_remaining is not None and response.length_remaining <= ANSWER_BYTES
    with suppress(urllib3.exceptions.HTTPError):
        while short and response.length_remaining and time.monotonic() < deadline:
            response.read1(ANSWER_BYTES, decode_content=False)
    if response.length_remaining != 0:
        response.close()
    response.release_conn()
