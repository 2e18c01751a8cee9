"""Several hosts on one PostgreSQL behind the shipped nginx site, with webhooks: clients create,
change and delete plants while one host is killed -9 and started again, another reloaded, and
PostgreSQL restarted; what the clients were told must hold throughout."""

import collections
import contextlib
import dataclasses
import http.client
import json
import os
import random
import re
import signal
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path

import psycopg
import pytest

from plantstore.testing.gunicorn_server import GunicornServer, send, server_environ
from plantstore.testing.postgres_server import PostgresServer
from plantstore.testing.webhook_receiver import SECRET, WebhookReceiver
from tests.support.nginx_proxy import NginxProxy, unit_gunicorn_flags

pytestmark = pytest.mark.slow

#: The hosts, each a gunicorn master of its own on a loopback address: the first serves
#: throughout, the second is killed -9 and started again, the third reloaded (SIGHUP).
HOSTS = ("127.0.0.2", "127.0.0.3", "127.0.0.4")
#: Client threads, each with a token of its own: the site's rate is counted per token.
CLIENTS = 8
TOKENS = [f"several-hosts-{n}" for n in range(CLIENTS)]
#: Plants every client changes, compare-and-set, racing the others.
SHARED_IDS = (-3, -2, -1)
#: Changes acknowledged between two faults, and after the last: the load before each fault
#: and the load that shows the service recovered from it.
CHANGES_A_PHASE = 1200
#: Seconds any one phase may take, and a change may be retried for (a 503 says when).
PHASE_SECONDS = 30
SETTLE_SECONDS = 20
#: Seconds the outbox gets to deliver every event, once the load has ended.
DRAIN_SECONDS = 60

#: What nginx answers when no host could: its own 503 page, not the service's.
NGINX_UNAVAILABLE = {
    "error": 503,
    "message": "The service is unavailable right now; try again shortly.",
}


@dataclasses.dataclass
class Answer:
    """What a client was told: its header names in lower case."""

    method: str
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self):
        return json.loads(self.body)


def request(port: int, method: str, path: str, body=None, headers=None) -> Answer:
    """Send one request to nginx on 127.0.0.1:`port`, on a connection of its own."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    status, answer_headers, answer_body = send(connection, method, path, body, headers)
    headers = {name.lower(): value for name, value in answer_headers.items()}
    return Answer(method, status, headers, answer_body)


def authorized(number: int) -> dict[str, str]:
    """The headers of each request of client `number`: its own token, and a JSON body."""
    return {"Authorization": f"Bearer {TOKENS[number]}", "Content-Type": "application/json"}


@dataclasses.dataclass
class Change:
    """A change a client asked for, and what it learned of it.

    `made` is True when it was acknowledged (or a 412 or 404 for a repeat of it was read as
    made), False when it was refused, and None when the client could not tell in time.
    """

    kind: str
    plant_id: int
    plant: dict | None
    made: bool | None
    if_match: str | None = None
    status: int | None = None
    #: The plant it changed (None for a create): what the id holds if it was not made.
    before: dict | None = None


class Client:
    """One client of the site: plants of its own (each id's whole history is this client's),
    and changes to the shared plants that race every other client's."""

    def __init__(self, number: int, port: int, stop: threading.Event, on_change) -> None:
        self._number = number
        self._port = port
        self._stop = stop
        self._on_change = on_change
        self._rng = random.Random(number)
        self._headers = authorized(number)
        self._next_id = number * 1_000_000
        self._counter = 0
        #: This client's live plants, as last acknowledged.
        self.live: dict[int, dict] = {}
        #: Its own ids whose last change it could not settle: it leaves them alone.
        self.unsettled: dict[int, Change] = {}
        self.changes: list[Change] = []
        self.answers: list[Answer] = []
        self.failures: list[str] = []

    def run(self) -> "Client":
        while not self._stop.is_set():
            dice = self._rng.random()
            if len(self.live) < 3 or dice < 0.3:
                self._create()
            elif dice < 0.6:
                self._replace()
            elif dice < 0.7:
                self._refused()
            elif dice < 0.8:
                self._delete()
            else:
                self._race(self._rng.choice(SHARED_IDS))
        return self

    def request(self, method: str, path: str, body=None, headers=None) -> Answer:
        answer = request(self._port, method, path, body, {**self._headers, **(headers or {})})
        self.answers.append(answer)
        return answer

    def settle(self, method: str, path: str, body=None, headers=None) -> Answer | None:
        """Send until the answer is neither 503 nor 429, each waited out as its `Retry-After`
        says, as a client of the service does; None if it still was after `SETTLE_SECONDS`."""
        deadline = time.monotonic() + SETTLE_SECONDS
        while True:
            answer = self.request(method, path, body, headers)
            if answer.status not in (429, 503):
                return answer
            retry_after = float(answer.headers.get("retry-after", 1))
            if time.monotonic() + retry_after > deadline:
                return None
            # The client's own pacing, as the answer asks: nothing here waits for the test.
            time.sleep(retry_after)

    def _name(self, what: str) -> str:
        self._counter += 1
        return f"{what}{self._number}.{self._counter}"

    def _record(self, change: Change) -> None:
        self.changes.append(change)
        if change.made:
            self._on_change()

    def _unexpected(self, what: str, answer: Answer | None) -> None:
        self.failures.append(f"{what}: {answer and (answer.status, answer.body)}")

    def _create(self) -> None:
        plant_id, plant = self._next_id, {"name": self._name("c"), "tag": "own"}
        self._next_id += 1
        answer = self.settle("POST", "/plants", json.dumps({"id": plant_id, **plant}))
        if answer is None:
            self.unsettled[plant_id] = Change("create", plant_id, plant, None)
            self._record(self.unsettled[plant_id])
        elif answer.status == 200 and answer.json() == plant:
            self.live[plant_id] = plant
            self._record(Change("create", plant_id, plant, True, status=200))
        else:
            self._unexpected(f"create of {plant_id}", answer)

    def _read(self, plant_id: int) -> Answer | None:
        return self.settle("GET", f"/plants/{plant_id}")

    def _own(self) -> int:
        return self._rng.choice(sorted(self.live))

    def _replace(self) -> None:
        """Read one of its plants, then `PUT` it with `If-Match` of the `ETag` read. A 412 can
        only be its own change, made by an attempt whose answer was lost (nginx sent it on to
        another host): it reads the plant and compares."""
        plant_id = self._own()
        read = self._read(plant_id)
        if read is None or read.status != 200 or read.json() != self.live[plant_id]:
            self._unexpected(f"read of {plant_id}", read)
            return
        plant = {"name": self._name("p"), "tag": "own"}
        etag = read.headers["etag"]
        answer = self.settle("PUT", f"/plants/{plant_id}", json.dumps(plant), {"If-Match": etag})
        change = Change("replace", plant_id, plant, True, etag, before=self.live[plant_id])
        if answer is None:
            change.made = None
            self.unsettled[plant_id] = change
            del self.live[plant_id]
        elif answer.status == 200 and answer.json() == plant:
            change.status = 200
            self.live[plant_id] = plant
        elif answer.status == 412:
            change.status = 412
            again = self._read(plant_id)
            if again is None or again.status != 200 or again.json() != plant:
                self._unexpected(f"a 412 to a PUT of {plant_id} no one else changed", again)
                return
            self.live[plant_id] = plant
        else:
            self._unexpected(f"PUT of {plant_id}", answer)
            return
        self._record(change)

    def _refused(self) -> None:
        """A change the service must refuse, and send no event for: a `PUT` on an `ETag` the
        plant never had, or a `POST` of other content under its id."""
        plant_id = self._own()
        plant = {"name": self._name("r"), "tag": "own"}
        if self._rng.random() < 0.5:
            answer = self.settle(
                "PUT", f"/plants/{plant_id}", json.dumps(plant), {"If-Match": '"no-such-etag"'}
            )
            refused = 412
        else:
            answer = self.settle("POST", "/plants", json.dumps({"id": plant_id, **plant}))
            refused = 409
        if answer is None or answer.status != refused:
            self._unexpected(f"a change of {plant_id} to refuse", answer)
        self._record(Change("refused", plant_id, plant, False, status=refused))

    def _delete(self) -> None:
        """A 404 can only be its own delete, made by an attempt whose answer was lost."""
        plant_id = self._own()
        answer = self.settle("DELETE", f"/plants/{plant_id}")
        change = Change("delete", plant_id, None, True, before=self.live.pop(plant_id))
        if answer is None:
            change.made = None
            self.unsettled[plant_id] = change
        elif answer.status in (204, 404):
            change.status = answer.status
        else:
            self._unexpected(f"DELETE of {plant_id}", answer)
            return
        self._record(change)

    def _race(self, plant_id: int) -> None:
        """Rename a shared plant as read: its new name is the name read, `>`, and a token of
        this change's own, sent with `If-Match` of the `ETag` read. A 412 means another client
        won, or (nginx having sent it on to another host) that this change was made: either
        way the client reads again another time; the final name tells which."""
        read = self._read(plant_id)
        if read is None or read.status != 200:
            self._unexpected(f"read of shared {plant_id}", read)
            return
        plant = {"name": f"{read.json()['name']}>{self._name('s')}"}
        etag = read.headers["etag"]
        answer = self.settle("PUT", f"/plants/{plant_id}", json.dumps(plant), {"If-Match": etag})
        change = Change("race", plant_id, plant, None, etag)
        if answer is not None and answer.status == 200 and answer.json() == plant:
            change.made, change.status = True, 200
        elif answer is not None and answer.status == 412:
            change.status = 412
        elif answer is not None:
            self._unexpected(f"PUT of shared {plant_id}", answer)
            return
        self._record(change)


class Hosts:
    """The three hosts' gunicorns, each with its access and error logs in a directory of its
    own (a host started again gets a new one), and the logs of those stopped."""

    def __init__(self, environ: dict[str, str], directory: Path) -> None:
        self._environ = environ
        self._directory = directory
        self.servers: dict[str, GunicornServer] = {}
        self.logs: dict[str, list[tuple[str, str]]] = collections.defaultdict(list)
        for host in HOSTS:
            self.start(host)

    def start(self, host: str, port: int = 0) -> None:
        log_dir = self._directory / f"{host}-{len(self.logs[host])}"
        log_dir.mkdir()
        self.servers[host] = GunicornServer(
            self._environ, *unit_gunicorn_flags(), host=host, port=port, log_dir=log_dir
        )

    def kill_and_start_again(self, host: str) -> None:
        killed = self.servers.pop(host)
        killed.kill()
        self.logs[host].append(killed.stop())
        self.start(host, killed.port)

    def reload(self, host: str) -> None:
        os.kill(self.servers[host].pid, signal.SIGHUP)

    def has_served_since_started(self, host: str) -> bool:
        """Whether the host's running gunicorn has logged a request."""
        access_log = self._directory / f"{host}-{len(self.logs[host])}" / "access.log"
        return access_log.stat().st_size > 0

    def upstream(self) -> list[str]:
        return [f"{host}:{self.servers[host].port}" for host in HOSTS]

    def stop(self) -> None:
        for host, server in self.servers.items():
            self.logs[host].append(server.stop())
        self.servers.clear()


@dataclasses.dataclass
class Service:
    hosts: Hosts
    nginx: NginxProxy
    receiver: WebhookReceiver
    postgres: PostgresServer


@pytest.fixture
def service(postgres_cluster, receiver, tmp_path):
    """The hosts on one new database of `postgres_cluster`, with a webhook receiver, behind
    nginx; once stopped, no host or nginx logged a traceback or a critical error."""
    with psycopg.connect(postgres_cluster.url(), autocommit=True) as connection:
        connection.execute("CREATE DATABASE plants")
    environ = server_environ(
        PLANTSTORE_STORE=postgres_cluster.url("plants"),
        PLANTSTORE_TOKENS=",".join(TOKENS),
        WEB_CONCURRENCY="2",
        # nginx reaches the hosts from 127.0.0.1: as each host's unit would name its nginx.
        FORWARDED_ALLOW_IPS="127.0.0.1",
        PLANTSTORE_WEBHOOK_URLS=receiver.url,
        PLANTSTORE_WEBHOOK_SECRET=SECRET,
        # A delivery a killed worker had claimed is due again after twice this and 5 s.
        PLANTSTORE_WEBHOOK_TIMEOUT="2",
    )
    (tmp_path / "hosts").mkdir()
    (tmp_path / "nginx").mkdir()
    nginx_log = []
    with contextlib.ExitStack() as running:
        hosts = Hosts(environ, tmp_path / "hosts")
        running.callback(hosts.stop)
        nginx = NginxProxy(tmp_path / "nginx", hosts.upstream())
        running.callback(lambda: nginx_log.append(nginx.stop()))
        yield Service(hosts, nginx, receiver, postgres_cluster)
    assert not re.search(r"\[(emerg|alert|crit)\]", nginx_log[0]), nginx_log[0]
    for host, logs in hosts.logs.items():
        for _, error_log in logs:
            assert "Traceback" not in error_log, f"{host}:\n{error_log}"


def load_through_faults(service: Service) -> list[Client]:
    """Run the clients, and between phases of their load, kill the second host and start it
    again, reload the third, and restart PostgreSQL; give back the clients once stopped."""
    acknowledged = threading.Semaphore(0)
    stop = threading.Event()
    clients = [Client(n, service.nginx.port, stop, acknowledged.release) for n in range(CLIENTS)]

    def after_a_phase() -> None:
        """Wait until the clients have made `CHANGES_A_PHASE` changes more."""
        deadline = time.monotonic() + PHASE_SECONDS
        for _ in range(CHANGES_A_PHASE):
            assert acknowledged.acquire(timeout=max(0, deadline - time.monotonic())), (
                "the load made too few changes in a phase"
            )

    with ThreadPoolExecutor(CLIENTS) as pool:
        running = [pool.submit(client.run) for client in clients]
        try:
            after_a_phase()
            service.hosts.kill_and_start_again(HOSTS[1])
            after_a_phase()
            service.hosts.reload(HOSTS[2])
            after_a_phase()
            service.postgres.stop()
            service.postgres.start()
            after_a_phase()
            # nginx leaves a host that failed out for 10 s: the load goes on until it has sent
            # the host started again requests too, however fast the phases went.
            deadline = time.monotonic() + PHASE_SECONDS
            while not service.hosts.has_served_since_started(HOSTS[1]):
                assert acknowledged.acquire(timeout=max(0, deadline - time.monotonic())), (
                    "nginx sent the host started again no request"
                )
        finally:
            stop.set()
        for done in running:
            done.result()
    return clients


def assert_answers_are_json_and_no_5xx_but_503(answers: list[Answer]) -> None:
    """And every 503 the service's own: nginx always found a host that could answer."""
    for answer in answers:
        assert answer.status < 500 or answer.status == 503, answer
        if answer.status in (429, 503):
            assert answer.headers["retry-after"] == "1"
        if answer.status != 204:
            assert answer.headers["content-type"] == "application/json"
            answer.json()
        if answer.status >= 400:
            assert answer.json()["error"] == answer.status
        if answer.status == 503:
            assert answer.json() != NGINX_UNAVAILABLE


def every_plant(reader: Client) -> dict[int, dict]:
    """Every plant stored, by id, read page after page as `Link: rel="next"` leads."""
    plants, target = {}, "/plants?limit=1000"
    while target:
        page = reader.settle("GET", target)
        assert page.status == 200
        for plant in page.json():
            plants[plant.pop("id")] = plant
        link = page.headers.get("link")
        target = link and re.fullmatch(r'<([^>]+)>; rel="next"', link)[1]
    return plants


def assert_own_plants_kept_as_last_acknowledged(clients: list[Client], stored: dict) -> None:
    """Each id as its client last knew it, and no other; one whose last change the client
    could not settle, as before or after that change, which then counts as made or not."""
    for client in clients:
        for plant_id, plant in client.live.items():
            assert stored.get(plant_id) == plant, plant_id
        for plant_id, change in client.unsettled.items():
            assert stored.get(plant_id) in (change.before, change.plant), change
            change.made = stored.get(plant_id) == change.plant
    known = {plant_id for client in clients for plant_id in [*client.live, *client.unsettled]}
    assert set(stored) - set(SHARED_IDS) <= known


def assert_shared_plants_have_one_history(races: list[Change], stored: dict) -> None:
    """Each name is the name it replaced, `>`, and a token, so the final name spells the
    plant's whole history: every 200 is a step of it (none lost), and each step a change some
    client sent, whatever it was answered (which then counts as made, any other as not)."""
    steps = set()
    for plant_id in SHARED_IDS:
        history = stored[plant_id]["name"].split(">")
        assert history[0] == f"s{plant_id}"
        steps |= {(plant_id, ">".join(history[:n])) for n in range(2, len(history) + 1)}
    sent = {(change.plant_id, change.plant["name"]): change for change in races}
    winners = [change for change in races if change.status == 200]
    assert {(change.plant_id, change.plant["name"]) for change in winners} <= steps
    assert steps <= set(sent)
    for change in races:
        change.made = (change.plant_id, change.plant["name"]) in steps


def event_of(change: Change) -> tuple:
    """What the event of `change` says: its type, the plant's id and name."""
    if change.kind == "delete":
        return ("plant.deleted", change.plant_id, None)
    kind = "plant.created" if change.kind == "create" else "plant.updated"
    return (kind, change.plant_id, change.plant["name"])


def wait_for_events(receiver: WebhookReceiver, expected: set[tuple]) -> None:
    """Wait until an event of each of `expected` has arrived, or `DRAIN_SECONDS` have passed."""
    missing, position = set(expected), 0

    def drained(deliveries) -> bool:
        nonlocal position
        for delivery in deliveries[position:]:
            data = delivery.event["data"]
            missing.discard((delivery.event["type"], data["id"], data.get("name")))
        position = len(deliveries)
        return not missing

    receiver.wait_for(drained, DRAIN_SECONDS)


def latest_event(receiver: WebhookReceiver) -> float:
    """The longest a change's event took to arrive, in seconds, from the event's timestamp."""
    first = {}
    for delivery in receiver.deliveries:
        first.setdefault(delivery.webhook_id, delivery)
    return max(
        delivery.received - datetime.fromisoformat(delivery.event["timestamp"]).timestamp()
        for delivery in first.values()
    )


def test_three_hosts_on_one_postgresql_keep_every_acknowledged_change_through_faults(
    service, note_figure
):
    """What users who outgrow one machine run, and what its clients were told holds: a host
    crashing, a reload and a database restart lose no acknowledged change and fork no plant's
    history, each change is heard of once, and a client meets nothing but the API's answers
    and 503s to retry."""
    began = time.monotonic()
    reader = Client(0, service.nginx.port, threading.Event(), lambda: None)
    for plant_id in SHARED_IDS:
        plant = json.dumps({"id": plant_id, "name": f"s{plant_id}"})
        assert reader.settle("POST", "/plants", plant).status == 200
    clients = load_through_faults(service)
    load_seconds = time.monotonic() - began
    assert [failure for client in clients for failure in client.failures] == []
    changes = [change for client in clients for change in client.changes]
    races = [change for change in changes if change.kind == "race"]

    stored = every_plant(reader)
    assert_own_plants_kept_as_last_acknowledged(clients, stored)
    assert_shared_plants_have_one_history(races, stored)
    # One winner for each `ETag` a PUT sent in `If-Match`, across the hosts.
    won = [change for change in changes if change.if_match and change.status == 200]
    assert max(collections.Counter((c.plant_id, c.if_match) for c in won).values()) == 1
    answers = [answer for client in [reader, *clients] for answer in client.answers]
    assert_answers_are_json_and_no_5xx_but_503(answers)

    # Every change made has its event once, after de-duplication by webhook-id, and no change
    # refused has one; every delivery's signature verified.
    expected = collections.Counter(event_of(change) for change in changes if change.made)
    expected.update(("plant.created", plant_id, f"s{plant_id}") for plant_id in SHARED_IDS)
    assert max(expected.values()) == 1
    wait_for_events(service.receiver, set(expected))
    events = collections.Counter(
        (event["type"], event["data"]["id"], event["data"].get("name"))
        for event in service.receiver.events().values()
    )
    assert sorted(set(expected) - set(events)) == []
    assert events == expected
    assert service.receiver.unverified == 0

    # Every host served requests: the one killed, before and after, the one reloaded.
    service.hosts.stop()
    served = {
        host: [len(access_log.splitlines()) for access_log, _ in service.hosts.logs[host]]
        for host in HOSTS
    }
    assert all(count > 0 for counts in served.values() for count in counts), served

    statuses = collections.Counter(answer.status for answer in answers)
    nginx_log = (service.nginx.directory / "error.log").read_text()
    note_figure(
        f"three hosts: {len(answers)} requests, {load_seconds:.1f} s of load "
        f"({dict(sorted(statuses.items()))}), served {served}, "
        f"{nginx_log.count('[error]')} attempts nginx sent on; "
        f"{sum(1 for c in changes if c.made and c.kind != 'refused')} changes made, "
        f"{len(won)} PUTs won ({sum(1 for c in races if c.status == 200)} of {len(races)} "
        "racing on shared plants), "
        f"{sum(1 for c in changes if c.status in (404, 412) and c.made)} made though "
        f"answered 404 or 412, {sum(1 for c in changes if c.made is None)} unsettled; "
        f"{len(events)} events ({len(service.receiver.deliveries)} deliveries), the latest "
        f"{latest_event(service.receiver):.1f} s after its change"
    )
