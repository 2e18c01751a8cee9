"""The feed across hosts: three hosts write to one PostgreSQL at once, some of their batches
committing after batches that began after them (held at their commit on purpose), one host is
killed -9 and started again; a follower that reads with `wait` from the start, from whichever
host, gets every change once, each plant's in the order of its commits, and ends with what the
store holds."""

import http.client
import json
import random
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path

import psycopg
import pytest

from plantstore.testing.gunicorn_server import GunicornServer, send, server_environ
from tests.support.held_commits import hold_commits_sql

pytestmark = pytest.mark.slow

HOSTS = ("127.0.0.2", "127.0.0.3", "127.0.0.4")
TOKEN = "feed-hosts"
AUTH = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
#: Plants every writer renames compare-and-set, version after version: v1, v2, ...
SHARED_IDS = (-3, -2, -1)
WRITERS = 5
#: Seconds the writers write, and the follower may take to catch up once they stopped.
WRITING_SECONDS = 20
CATCH_UP_SECONDS = 60
#: The advisory lock the test holds to hold a batch at its commit.
COMMIT_LOCK = 0x66656564
#: A check PostgreSQL makes at the commit of a plant named `held...`: it waits for the lock.
HOLD_COMMITS = hold_commits_sql(COMMIT_LOCK, when="NEW.plant->>'name' LIKE 'held%'")
#: The transaction held at its commit, once it waits for the lock.
HELD = (
    "SELECT a.backend_xid::text::bigint FROM pg_locks l JOIN pg_stat_activity a USING (pid) "
    "WHERE l.locktype = 'advisory' AND NOT l.granted AND a.backend_xid IS NOT NULL"
)


def ask(host: str, port: int, method: str, path: str, body=None, headers=AUTH):
    """One request to a host; None when it could not be made (the host is down)."""
    try:
        status, answer_headers, answer = send(
            http.client.HTTPConnection(host, port, timeout=40),
            method,
            path,
            None if body is None else json.dumps(body),
            headers,
        )
    except OSError:
        return None
    return status, {name.lower(): value for name, value in answer_headers.items()}, answer


class Hosts:
    """Three hosts on one database, each a gunicorn on a loopback address of its own, its logs
    in a directory of its own (a host started again gets a new one)."""

    def __init__(self, url: str, directory: Path) -> None:
        self._environ = server_environ(
            PLANTSTORE_TOKENS=TOKEN, PLANTSTORE_STORE=url, WEB_CONCURRENCY="2"
        )
        self._directory = directory
        self._started = 0
        self.servers = {host: self._start(host) for host in HOSTS}

    def _start(self, host: str, port: int = 0) -> GunicornServer:
        self._started += 1
        log_dir = self._directory / f"{host}-{self._started}"
        log_dir.mkdir()
        return GunicornServer(self._environ, host=host, port=port, log_dir=log_dir)

    def kill_and_start_again(self, host: str) -> None:
        killed = self.servers[host]
        killed.kill()
        killed.stop()
        self.servers[host] = self._start(host, killed.port)

    def ask(self, rng: random.Random, method: str, path: str, body=None, headers=AUTH):
        """Ask hosts in a random order until one answers other than 503."""
        for host in rng.sample(HOSTS, len(HOSTS)):
            answer = ask(host, self.servers[host].port, method, path, body, headers)
            if answer is not None and answer[0] != 503:
                return answer
        return None

    def stop(self) -> None:
        for server in self.servers.values():
            server.stop()


def rename_shared(hosts: Hosts, rng: random.Random, versions: dict, lock: threading.Lock):
    """Read a shared plant and rename it to its next version, only as read (If-Match)."""
    plant_id = rng.choice(SHARED_IDS)
    read = hosts.ask(rng, "GET", f"/plants/{plant_id}")
    if read is None:
        return
    status, headers, body = read
    if status == 404:
        version, condition = 1, {"If-None-Match": "*"}
    else:
        version = int(json.loads(body)["name"].removeprefix("v")) + 1
        condition = {"If-Match": headers["etag"]}
    answer = hosts.ask(
        rng, "PUT", f"/plants/{plant_id}", {"name": f"v{version}"}, {**AUTH, **condition}
    )
    if answer is not None and answer[0] in (200, 201):
        with lock:
            versions.setdefault(plant_id, []).append(version)


def write(hosts: Hosts, number: int, stop: threading.Event, versions: dict, lock) -> int:
    """Create, delete and rename plants until `stop`; give the number of changes asked for."""
    rng = random.Random(number)
    own = []
    asked = 0
    while not stop.is_set():
        asked += 1
        choice = rng.random()
        if choice < 0.4:
            plant_id = number * 1_000_000 + asked
            name = f"held {plant_id}" if number == 0 and asked % 5 == 0 else f"plant {plant_id}"
            if hosts.ask(rng, "POST", "/plants", {"id": plant_id, "name": name}):
                own.append(plant_id)
        elif choice < 0.6 and own:
            hosts.ask(rng, "DELETE", f"/plants/{own.pop(rng.randrange(len(own)))}")
        else:
            rename_shared(hosts, rng, versions, lock)
    return asked


def last_position(url: str) -> int:
    """The position of the last event the database holds."""
    with psycopg.connect(url) as connection:
        return connection.execute("SELECT max(position) FROM events").fetchone()[0]


def follow(hosts: Hosts, after: str, stop: threading.Event, until_head) -> list[dict]:
    """Read the feed with `wait`, from `after`, from hosts in turn, until `stop` and then the
    position `until_head()` gives are passed; fail if that takes over `CATCH_UP_SECONDS`."""
    rng = random.Random(-1)
    events: list[dict] = []
    final = deadline = None
    while final is None or int(after) < final:
        if final is None and stop.is_set():
            final, deadline = until_head(), time.monotonic() + CATCH_UP_SECONDS
        assert deadline is None or time.monotonic() < deadline, "the follower fell behind"
        answer = hosts.ask(rng, "GET", f"/events?after={after}&limit=50&wait=2")
        if answer is None:
            continue
        status, _, body = answer
        assert status == 200, body
        page = json.loads(body)
        events += page["events"]
        after = page["after"]
    return events


def hold_commits(url: str, stop: threading.Event, seen: list) -> None:
    """Hold each `held` batch at its commit until a later transaction committed an event, and
    note that one did: a reader by position alone would have passed the held one's events."""
    with psycopg.connect(url, autocommit=True) as test:
        while not stop.is_set():
            test.execute("SELECT pg_advisory_lock(%s)", (COMMIT_LOCK,))
            try:
                deadline = time.monotonic() + 2
                while time.monotonic() < deadline and not stop.wait(0.01):
                    held = test.execute(HELD).fetchone()
                    if held is None:
                        continue
                    later = test.execute(
                        "SELECT count(*) FROM events WHERE position > %s", (held[0] << 16,)
                    ).fetchone()[0]
                    if later:
                        seen.append(later)
                        break
            finally:
                test.execute("SELECT pg_advisory_unlock(%s)", (COMMIT_LOCK,))


def test_a_follower_of_three_hosts_gets_each_change_once_in_each_plants_commit_order(
    tmp_path, postgres_cluster, note_figure
):
    with psycopg.connect(postgres_cluster.url(), autocommit=True) as setup:
        setup.execute("CREATE DATABASE feed")
    url = postgres_cluster.url("feed")
    hosts = Hosts(url, tmp_path)
    try:
        rng = random.Random(0)
        start = hosts.ask(rng, "GET", "/plants")[1]["events-after"]
        with psycopg.connect(url, autocommit=True) as setup:
            setup.execute(HOLD_COMMITS)
        stop, followed, versions, lock, overtaken = (
            threading.Event(),
            threading.Event(),
            {},
            threading.Lock(),
            [],
        )
        with ThreadPoolExecutor(8) as pool:
            follower = pool.submit(
                follow,
                hosts,
                start,
                followed,
                partial(last_position, url),
            )
            holder = pool.submit(hold_commits, url, stop, overtaken)
            writers = [pool.submit(write, hosts, n, stop, versions, lock) for n in range(WRITERS)]
            try:
                # The load runs for its time; a host is killed and started again half-way.
                stop.wait(WRITING_SECONDS / 2)
                hosts.kill_and_start_again(HOSTS[1])
                stop.wait(WRITING_SECONDS / 2)
            finally:
                stop.set()
                try:
                    asked = sum(writer.result(60) for writer in writers)
                    holder.result(60)
                finally:
                    followed.set()
            events = follower.result(120)
        with psycopg.connect(url) as connection:
            stored = connection.execute(
                "SELECT position, document FROM events WHERE position > %s ORDER BY position",
                (int(start),),
            ).fetchall()
            plants = dict(connection.execute("SELECT id, plant::text FROM plants").fetchall())
    finally:
        hosts.stop()

    note_figure(
        f"feed across hosts: {asked} changes asked, {len(events)} events followed, "
        f"{len(overtaken)} batches committed after later ones"
    )
    assert overtaken, "no batch was ever held at its commit while a later one committed"
    assert asked > 200 and len(events) > 100
    ids = [int(event["id"]) for event in events]
    assert len(ids) == len(set(ids)), "an event came twice"
    assert ids == [position for position, _ in stored], "the follower missed or added events"
    assert events == [json.loads(document) for _, document in stored]
    for plant_id in SHARED_IDS:
        renamed = [
            int(event["plant"]["name"].removeprefix("v"))
            for event in events
            if event["plant_id"] == plant_id and event["plant"] is not None
        ]
        # Each rename is conditional on the version before it: the events are the chain 1, 2, …
        # in order. A rename committed as its host was killed has no answer, so the writers
        # know of every version in the chain but the few in flight at the kill.
        assert renamed == list(range(1, len(renamed) + 1)), f"plant {plant_id}'s order"
        acknowledged = sorted(versions.get(plant_id, []))
        assert set(acknowledged) <= set(renamed), f"an acknowledged rename of {plant_id} is lost"
        assert len(renamed) - len(acknowledged) <= WRITERS, f"{plant_id} renamed unasked"
    copy: dict[int, dict] = {}
    for event in events:
        if event["plant"] is None:
            copy.pop(event["plant_id"], None)
        else:
            copy[event["plant_id"]] = event["plant"]
    assert copy == {plant_id: json.loads(plant) for plant_id, plant in plants.items()}
