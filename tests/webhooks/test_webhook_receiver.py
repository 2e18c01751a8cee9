"""The receiver the webhook tests trust: it must refuse what a subscriber would refuse, or
every delivery test would pass whatever the service signs."""

import http.client
import json
import socket
import time
from datetime import UTC, datetime

import pytest
from standardwebhooks import Webhook

from plantstore.testing.webhook_receiver import (
    SECRET,
    TRICKLE_SECONDS,
    TRICKLED_BODY,
    WebhookReceiver,
)

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
    connection = send(receiver, body, secret, timeout, signed)
    try:
        return connection.getresponse().status
    finally:
        connection.close()


def send(
    receiver: WebhookReceiver,
    body: bytes = EVENT,
    secret: str = SECRET,
    timeout: float = 5,
    signed: bytes | None = None,
) -> http.client.HTTPConnection:
    """Send the delivery that `post` does; give the connection, its answer still unread."""
    now = datetime.now(tz=UTC)
    headers = {
        "webhook-id": "msg_1",
        "webhook-timestamp": str(int(now.timestamp())),
        "webhook-signature": Webhook(secret).sign("msg_1", now, (signed or body).decode()),
        "Content-Type": "application/json",
    }
    connection = http.client.HTTPConnection("127.0.0.1", receiver.port, timeout=timeout)
    connection.request("POST", "/hooks", body, headers)
    return connection


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


def test_a_held_delivery_is_answered_as_the_receiver_was_told_when_it_arrived():
    """So that a test may hold failing deliveries, then have new ones succeed, and never count
    one held as delivered, however its sender went."""
    with WebhookReceiver() as receiver:
        receiver.answer(500)
        receiver.hold()
        connection = send(receiver)
        assert receiver.wait_for(lambda got: receiver.attempts == 1, 5)
        receiver.answer(200)
        receiver.release()
        assert connection.getresponse().status == 500
        connection.close()
        assert receiver.events() == {}
        assert post(receiver, EVENT) == 200


def test_a_trickled_body_comes_a_byte_at_a_time():
    with WebhookReceiver() as receiver:
        receiver.answer(200, trickle=True)
        connection = send(receiver)
        try:
            head = connection.sock.recv(1024)
            assert head.startswith(b"HTTP/1.1 200 OK\r\n")
            assert f"Content-Length: {len(TRICKLED_BODY)}\r\n".encode() in head
            started = time.monotonic()
            got = [connection.sock.recv(1024) for _ in range(4)]
            assert time.monotonic() - started >= 2 * TRICKLE_SECONDS
        finally:
            connection.close()
    assert got == [bytes([byte]) for byte in TRICKLED_BODY[:4]]


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


def test_a_delivery_cut_off_mid_body_is_neither_recorded_nor_counted_unverified():
    """What a sender killed as it sent leaves: no delivery to record, no signature to fail."""
    now = datetime.now(tz=UTC)
    head = (
        "POST /hooks HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(EVENT)}\r\nwebhook-id: msg_1\r\n"
        f"webhook-timestamp: {int(now.timestamp())}\r\n"
        f"webhook-signature: {Webhook(SECRET).sign('msg_1', now, EVENT.decode())}\r\n\r\n"
    )
    with WebhookReceiver() as receiver:
        with socket.create_connection(("127.0.0.1", receiver.port), timeout=5) as sender:
            sender.sendall(head.encode() + EVENT[: len(EVENT) // 2])
            sender.shutdown(socket.SHUT_WR)
            answer = sender.recv(65536)
        assert (answer, receiver.attempts, receiver.unverified) == (b"", 0, 0)
        assert receiver.events() == {}
