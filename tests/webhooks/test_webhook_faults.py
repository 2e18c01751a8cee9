"""Every change a client was told of reaches the subscriber, through its faults and the service's.

The real gunicorn, two workers, one shared store (SQLite, then PostgreSQL), and a subscriber on
loopback that verifies every signature. In each test plants are created and deleted from
several clients at once while a fault lasts; then the fault ends, and every create and delete
that was acknowledged must be heard exactly once after de-duplication by `webhook-id` (as a
subscriber does it), nothing else and nothing unverified, and the outbox must end empty.

A subscriber that holds deliveries answers each as it would have when it arrived: one held
while it answered 500 is never recorded, so a delivery cut off by a kill or a stop cannot
pass for one the service saw through.
"""

import contextlib
import json
import os
import signal
import sqlite3
import time
from pathlib import Path

import psycopg
import pytest

from plantstore.testing.gunicorn_server import GunicornServer, server_environ
from plantstore.testing.webhook_receiver import SECRET, WebhookReceiver
from plantstore.webhooks.deliverer import SENDERS, backoff
from tests.conftest import TOKEN
from tests.support.concurrency import at_once
from tests.support.workers import scrape_server

AUTH = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
WORKERS = 2
#: PLANTSTORE_WEBHOOK_TIMEOUT: short, so that attempts cut off end soon.
TIMEOUT = 1
#: GUNICORN_GRACEFUL_TIMEOUT: a worker that outlives it is killed, its attempts unrecorded.
GRACEFUL_TIMEOUT = 5
#: Clients creating and deleting at once, and the plants each creates (deleting every other).
CLIENTS, PLANTS_EACH = 4, 6
#: Seconds any wait for the service gets: the slowest one, a claim left by a killed worker
#: running out, takes 2 * TIMEOUT + LEASE_MARGIN_SECONDS.
PATIENCE = 30.0

pytestmark = [
    # Two real worker processes each, and a test that waits out a lease: the slow set.
    pytest.mark.slow,
    pytest.mark.parametrize("store_url", ["sqlite", "postgres"], indirect=True),
]


class Service:
    """The service under gunicorn, sending to `receiver`; started again as often as needed.

    Each run logs to a directory of its own: failed attempts are a warning each, and would fill
    a pipe that nobody reads.
    """

    def __init__(self, store_url: str, receiver: WebhookReceiver, tmp_path: Path) -> None:
        self.store_url = store_url
        self._environ = server_environ(
            PLANTSTORE_TOKENS=TOKEN,
            PLANTSTORE_STORE=store_url,
            WEB_CONCURRENCY=str(WORKERS),
            PLANTSTORE_WEBHOOK_URLS=receiver.url,
            PLANTSTORE_WEBHOOK_SECRET=SECRET,
            PLANTSTORE_WEBHOOK_TIMEOUT=str(TIMEOUT),
            GUNICORN_GRACEFUL_TIMEOUT=str(GRACEFUL_TIMEOUT),
        )
        self._tmp_path = tmp_path
        self.server: GunicornServer | None = None
        self.error_logs: list[str] = []

    def start(self) -> None:
        log_dir = self._tmp_path / f"run-{len(self.error_logs)}"
        log_dir.mkdir()
        self.server = GunicornServer(self._environ, log_dir=log_dir)

    def stop(self) -> None:
        """Stop gracefully, if running, keeping its error log."""
        if self.server is not None:
            self.error_logs.append(self.server.stop()[1])
            self.server = None

    def change_plants(self) -> set[tuple[str, int]]:
        """Create plants from `CLIENTS` clients at once, deleting every other one as soon as
        it is made; each change must be acknowledged. Give the events they owe the subscriber.
        """

        def client(number: int) -> set[tuple[str, int]]:
            owed = set()
            for n in range(PLANTS_EACH):
                plant_id = number * PLANTS_EACH + n
                body = json.dumps({"id": plant_id, "name": "fern"})
                assert self.server.request("POST", "/plants", body, AUTH)[0] == 200
                owed.add(("plant.created", plant_id))
                if n % 2:
                    path = f"/plants/{plant_id}"
                    assert self.server.request("DELETE", path, None, AUTH)[0] == 204
                    owed.add(("plant.deleted", plant_id))
            return owed

        return set().union(*at_once(CLIENTS, client))

    def failures(self) -> float:
        """Failed attempts so far, counted by every worker."""
        return scrape_server(self.server)[("plantstore_webhook_events_failed_total",)]

    def outbox(self) -> list[tuple[float, int]]:
        """When each delivery in the outbox may next be claimed, and its failed attempts."""
        query = "SELECT next_attempt_at, attempts FROM outbox"
        if self.store_url.startswith("sqlite:"):
            path = self.store_url.removeprefix("sqlite:///")
            with contextlib.closing(sqlite3.connect(path)) as connection:
                return connection.execute(query).fetchall()
        with psycopg.connect(self.store_url) as connection:
            return connection.execute(query).fetchall()

    def sending(self, port: int) -> dict[int, int]:
        """Each worker's connections open to `port`, read from /proc.

        With a subscriber that holds every delivery, unanswered, each is a delivery in flight:
        a sender closes its connection when its attempt times out.
        """
        established = set()
        for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
            _, _, remote, state, *_, inode = line.split()[:10]
            if state == "01" and int(remote.split(":")[1], 16) == port:
                established.add(f"socket:[{inode}]")
        counts = {}
        for pid in self.server.worker_pids():
            with contextlib.suppress(FileNotFoundError):
                fds = Path(f"/proc/{pid}/fd").iterdir()
                counts[pid] = sum(os.readlink(fd) in established for fd in fds)
        return counts


@pytest.fixture
def service(store_url, receiver, tmp_path):
    """The service, not started yet; stopped after the test, and its logs checked."""
    made = Service(store_url, receiver, tmp_path)
    yield made
    made.stop()
    for log in made.error_logs:
        assert "Traceback" not in log


def wait_until(condition, what: str, timeout: float = PATIENCE) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"{what}: not within {timeout:.0f} s")
        time.sleep(0.05)


def heard(receiver: WebhookReceiver) -> list[tuple[str, int]]:
    """Each event the subscriber acknowledged, once per `webhook-id`."""
    return [(event["type"], event["data"]["id"]) for event in receiver.events().values()]


def assert_told_exactly_once(service: Service, receiver: WebhookReceiver, owed: set) -> None:
    wait_until(lambda: owed <= set(heard(receiver)), "every change heard")
    wait_until(lambda: service.outbox() == [], "the outbox emptied")
    assert sorted(heard(receiver)) == sorted(owed)
    assert receiver.unverified == 0


def test_a_subscriber_answering_500_for_a_while_hears_every_change(service, receiver):
    receiver.answer(500)
    service.start()
    owed = service.change_plants()
    wait_until(lambda: service.failures() >= len(owed), "a failure for every event")
    receiver.answer(200)
    assert_told_exactly_once(service, receiver, owed)


def test_a_subscriber_refusing_connections_for_a_while_hears_every_change(service, receiver):
    receiver.refuse()
    service.start()
    owed = service.change_plants()
    wait_until(lambda: service.failures() >= len(owed), "a failure for every event")
    receiver.listen()
    assert_told_exactly_once(service, receiver, owed)


def test_a_subscriber_slower_than_the_timeout_for_a_while_hears_every_change(service, receiver):
    """Answers that come too late are failures, retried: the subscriber hears those events
    twice or more, and tells the repeats by `webhook-id`."""
    receiver.answer(200, delay=TIMEOUT + 1)
    service.start()
    owed = service.change_plants()
    # Every sender of every worker has timed out.
    wait_until(lambda: service.failures() >= WORKERS * SENDERS, "every sender timed out")
    receiver.answer(200)
    assert_told_exactly_once(service, receiver, owed)
    # The attempts that timed out were heard too, late: the repeats that webhook-id tells.
    assert receiver.wait_for(lambda got: len(got) > len(owed), PATIENCE)


def test_a_worker_killed_in_the_middle_of_deliveries_leaves_them_to_the_others(service, receiver):
    """What the killed worker had claimed is claimed again when its lease runs out."""
    receiver.answer(500)
    receiver.hold()
    service.start()
    owed = service.change_plants()
    wait_until(
        lambda: max(service.sending(receiver.port).values(), default=0) > 0,
        "deliveries in flight",
    )
    sending = service.sending(receiver.port)
    victim = max(sending, key=sending.get)
    os.kill(victim, signal.SIGKILL)
    wait_until(lambda: victim not in service.server.worker_pids(), "the worker killed")
    # Those held answer 500 as they were told when they arrived, the victim's to no one.
    receiver.answer(200)
    receiver.release()
    assert_told_exactly_once(service, receiver, owed)


def test_a_graceful_stop_ends_the_attempts_under_way_and_the_next_start_sends_the_rest(
    service, receiver
):
    """On SIGTERM each worker lets its attempts end, within the timeout, records them, and
    exits well within gunicorn's graceful timeout; nothing is sent, nothing is lost: each
    delivery waits in the outbox, claimed by no one, and the next start sends them all.
    """
    receiver.answer(500)
    receiver.hold()
    service.start()
    owed = service.change_plants()

    def in_flight_in_each_worker() -> bool:
        sending = service.sending(receiver.port)
        return len(sending) == WORKERS and min(sending.values()) > 0

    wait_until(in_flight_in_each_worker, "deliveries in flight in each worker")
    started = time.monotonic()
    service.stop()
    assert time.monotonic() - started < GRACEFUL_TIMEOUT
    stopped = time.time()
    left = service.outbox()
    assert len(left) == len(owed)

    def latest(attempts: int) -> float:
        """When a delivery is due at the latest, put back after `attempts` failures."""
        return stopped + (backoff(attempts) if attempts else 0)

    # Each attempt under way at the stop timed out and was put back for a retry, due within
    # its backoff; a worker that had left instead would have kept its claims (leases of
    # 2 * TIMEOUT + LEASE_MARGIN_SECONDS), and the next start would wait them out.
    assert [(at, attempts) for at, attempts in left if at > latest(attempts)] == []

    receiver.answer(200)
    receiver.release()
    service.start()
    assert_told_exactly_once(service, receiver, owed)
