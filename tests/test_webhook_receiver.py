"""The receiver the webhook tests trust: it must refuse what a subscriber would refuse, or
every delivery test would pass whatever the service signs."""

import http.client
import json
import socket
import time
from datetime import UTC, datetime

import pytest
from standardwebhooks import Webhook

from tests.webhook_receiver import SECRET, WebhookReceiver

EVENT = b'{"type":"plant.deleted","timestamp":"2026-11-23T19:00:00Z","data":{"id":7}}'


def post(
    receiver: WebhookReceiver,
    body: bytes,
    secret: str = SECRET,
    timeout: float = 5,
    signed: bytes | None = None,
) -> int:
    """Deliver `body` as a sender would, with the signature of `signed` (`body` itself unless
    given) made with `secret`; give the answer's status."""
    now = datetime.now(tz=UTC)
    headers = {
        "webhook-id": "msg_1",
        "webhook-timestamp": str(int(now.timestamp())),
        "webhook-signature": Webhook(secret).sign("msg_1", now, (signed or body).decode()),
        "Content-Type": "application/json",
    }
    connection = http.client.HTTPConnection("127.0.0.1", receiver.port, timeout=timeout)
    try:
        connection.request("POST", "/hooks", body, headers)
        return connection.getresponse().status
    finally:
        connection.close()


def test_it_records_a_delivery_signed_with_its_secret():
    with WebhookReceiver() as receiver:
        assert post(receiver, EVENT) == 200
        assert receiver.events() == {"msg_1": json.loads(EVENT)}


def test_it_refuses_a_delivery_signed_with_another_secret():
    with WebhookReceiver() as receiver:
        assert post(receiver, EVENT, secret="whsec_" + "QUJD" * 8) == 400
        assert receiver.unverified == 1
        assert receiver.events() == {}


def test_it_refuses_a_body_changed_after_signing():
    with WebhookReceiver() as receiver:
        assert post(receiver, EVENT.replace(b"7", b"8"), signed=EVENT) == 400
        assert receiver.events() == {}


def test_a_failing_answer_is_not_recorded_as_delivered():
    with WebhookReceiver() as receiver:
        receiver.answer(500)
        assert post(receiver, EVENT) == 500
        assert (receiver.attempts, receiver.events()) == (1, {})


def test_a_held_delivery_gets_no_answer_until_released():
    with WebhookReceiver() as receiver:
        receiver.hold()
        with pytest.raises(TimeoutError):
            post(receiver, EVENT, timeout=0.3)
        receiver.release()
        assert post(receiver, EVENT) == 200


def test_a_late_answer_comes_after_its_delay():
    with WebhookReceiver() as receiver:
        receiver.answer(200, delay=0.3)
        started = time.monotonic()
        assert post(receiver, EVENT) == 200
        assert time.monotonic() - started >= 0.3


def test_connections_are_refused_until_it_listens_again():
    with WebhookReceiver() as receiver:
        receiver.refuse()
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", receiver.port), timeout=1)
        receiver.listen()
        assert post(receiver, EVENT) == 200
