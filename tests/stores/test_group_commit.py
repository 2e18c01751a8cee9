"""Group commit (plantstore/stores/group_commit.py) on the SQLite and PostgreSQL stores.

Requests that wait together share a commit; each gets the answer some serial order gives it;
none is answered before its batch's commit returned; a batch whose commit fails answers 503
to each of its requests, and none of its changes is visible.

A test makes a batch of the requests it chooses: it holds the store's writer (with a change
whose condition waits, `held`, or with the SQLite writers' lock) while they queue, and lets it
go once each request waits for its answer (`queued`). To act between a batch's changes and its
commit, it ends the batch with another such change (`held_at_its_end`).
"""

import fcntl
import json
import os
import sqlite3
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from functools import cache, partial
from types import SimpleNamespace

import falcon.testing
import psycopg
import pytest

from plantstore.app import create_app
from plantstore.core.plants import Put
from plantstore.core.stores import PlantStore, StoreUnavailable
from plantstore.stores import group_commit, open_store
from plantstore.stores.changes import Add
from plantstore.stores.memory import MemoryStore
from plantstore.stores.postgres import PostgresStore
from plantstore.stores.postgres_batch import make_batch
from plantstore.stores.postgres_connections import STATEMENT_SECONDS
from plantstore.stores.postgres_schema import migrate
from plantstore.stores.sqlite import SqliteStore
from tests.conftest import TOKEN
from tests.stores.test_store_contract import document
from tests.stores.test_unavailable import assert_unavailable, fill
from tests.support.held_commits import hold_commits_sql

#: Seconds a test waits for what should come at once, before it fails rather than hangs.
PATIENCE = 10
#: The id of the plant a holder of the writer (`held`) asks to delete: there is none.
HOLDER_ID = -1
#: The same, for a holder at the end of a batch (`held_at_its_end`): in a batch that makes
#: its changes by id, it comes after every other.
LAST_ID = 1000

durable = pytest.mark.parametrize("store_url", ["sqlite", "postgres"], indirect=True)


class Noted:
    """What other threads note, in order, for a test to wait for."""

    def __init__(self) -> None:
        self.items: list = []
        self._noted = threading.Condition()

    def __call__(self, item: object) -> None:
        with self._noted:
            self.items.append(item)
            self._noted.notify_all()

    def wait_until(self, enough: Callable[[list], bool]) -> list:
        """What was noted, once it is `enough`."""
        with self._noted:
            assert self._noted.wait_for(lambda: enough(self.items), PATIENCE)
            return list(self.items)


@pytest.fixture
def queued(monkeypatch):
    """Every change's waiter, noted once its change is queued: when its request sleeps on its
    turn, or leads the batch at once."""
    noted = Noted()
    seen: set[int] = set()

    def note(waiter: group_commit.Waiter) -> None:
        if id(waiter) not in seen:
            seen.add(id(waiter))
            noted(waiter)

    sleep, lead = group_commit.Waiter.sleep, group_commit.GroupCommit._lead

    def sleeping(waiter, timeout=-1):
        note(waiter)
        return sleep(waiter, timeout)

    def leading(writer, leader):
        note(leader)
        return lead(writer, leader)

    monkeypatch.setattr(group_commit.Waiter, "sleep", sleeping)
    monkeypatch.setattr(group_commit.GroupCommit, "_lead", leading)
    return noted


def changes_in_all(count: int) -> Callable[[list[int]], bool]:
    """Whether commits of these numbers of changes made `count` changes: `on_commit` is called
    after the batch's requests are answered."""
    return lambda sizes: sum(sizes) >= count


def at_least(count: int) -> Callable[[list], bool]:
    return lambda items: len(items) >= count


class Commits(Noted):
    """A store's `on_commit`: it notes the number of changes of each commit."""

    def __call__(self, changes: int, events: int) -> None:
        super().__call__(changes)


@pytest.fixture
def commits():
    return Commits()


@pytest.fixture
def durable_store(store_url, commits):
    """A SQLite or PostgreSQL store, each empty, counting its commits in `commits`."""
    opened = open_store(store_url, on_commit=commits)
    yield opened
    opened.close()


@pytest.fixture
def callers():
    """Threads for requests that wait for their batch: many at once."""
    with ThreadPoolExecutor(32) as pool:
        yield pool


def client_of(config, store: PlantStore) -> falcon.testing.TestClient:
    return falcon.testing.TestClient(
        create_app(config, store), headers={"Authorization": f"Bearer {TOKEN}"}
    )


def queue_together(
    pool: ThreadPoolExecutor, queued: Noted, calls: Sequence[Callable[[], object]]
) -> list[Future]:
    """Make each call on a thread of its own; return once every one's change is queued."""
    waiting = len(queued.items) + len(calls)
    answers = [pool.submit(call) for call in calls]
    queued.wait_until(at_least(waiting))
    return answers


def queue_in_order(
    pool: ThreadPoolExecutor, queued: Noted, calls: Sequence[Callable[[], object]]
) -> list[Future]:
    """Make each call on a thread of its own, the next once the last's change is queued."""
    return [answer for call in calls for answer in queue_together(pool, queued, [call])]


class Holder:
    """The condition of a change that holds the writer, in its batch, until `released`: the
    changes that come meanwhile make the next batch."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.released = threading.Event()

    def __call__(self, kept: bytes | None) -> bool:
        self.entered.set()
        assert self.released.wait(PATIENCE)
        return True


@contextmanager
def held(store: PlantStore, pool: ThreadPoolExecutor, queued: Noted) -> Iterator[None]:
    """Hold the store's writer in a batch of its own (a delete of a missing plant) until the
    block ends."""
    holder = Holder()
    (answer,) = queue_together(pool, queued, [partial(store.delete, HOLDER_ID, holder)])
    assert holder.entered.wait(PATIENCE)
    try:
        yield
    finally:
        holder.released.set()
    assert answer.result(PATIENCE) is False


def held_at_its_end(
    store: PlantStore, pool: ThreadPoolExecutor, queued: Noted, calls: Sequence[Callable]
) -> tuple[list[Future], threading.Event]:
    """Make `calls` one batch, in order, and hold the writer once they are made, before its
    commit. Gives their answers, then the holder's, and the event that lets the batch go on,
    which the test is to set whatever happens."""
    last = Holder()
    with held(store, pool, queued):
        answers = queue_in_order(pool, queued, [*calls, partial(store.delete, LAST_ID, last)])
    if not last.entered.wait(PATIENCE):
        last.released.set()
        pytest.fail("the batch never came to its end")
    return answers, last.released


@contextmanager
def writers_lock_held(path) -> Iterator[None]:
    """Hold the lock the writers of a SQLite file queue on, as another process's writer would."""
    descriptor = os.open(f"{path}-writers", os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX)
        yield
    finally:
        os.close(descriptor)


# Concurrent changes share commits, and some serial order explains every answer.

THREADS = 16
IDS = 8


def contender_calls(thread: int) -> list[tuple[str, int, bytes | None]]:
    """What one thread asks: an add or a delete of three ids, then a delete of a missing one."""
    calls = []
    for step in range(3):
        plant_id = (thread + 3 * step) % IDS
        if (thread + step) % 3:
            calls.append(("add", plant_id, document(f"plant {thread} {step}")))
        else:
            calls.append(("delete", plant_id, None))
    return [*calls, ("delete", IDS + thread, None)]


def explained(calls: Sequence[tuple[str, bytes | None, object]], final: bytes | None) -> bool:
    """Whether some order of one id's `calls` (name, plant, answer), made one at a time from
    nothing, gives each its answer and leaves the id holding `final`."""
    every = (1 << len(calls)) - 1

    @cache
    def from_here(made: int, kept: bytes | None) -> bool:
        if made == every:
            return kept == final
        for n, (name, plant, answer) in enumerate(calls):
            if made & 1 << n:
                continue
            if name == "add":
                after = plant if kept is None else kept
                fits = answer == after
            else:
                after, fits = None, answer is (kept is not None)
            if fits and from_here(made | 1 << n, after):
                return True
        return False

    return from_here(0, None)


@durable
def test_concurrent_creates_and_deletes_share_commits_and_follow_some_serial_order(
    durable_store, commits, queued, callers
):
    """Per id, some serial order gives every add and delete its answer and leaves what the
    id holds; a delete of a plant never kept finds none. Each thread's first change queues
    while the writer is held, so that they make one batch at least; the rest race."""
    start = threading.Barrier(THREADS)

    def contend(thread: int) -> list[tuple[str, int, bytes | None, object]]:
        start.wait()
        answers = []
        for name, plant_id, plant in contender_calls(thread):
            if name == "add":
                answers.append((name, plant_id, plant, durable_store.add(plant_id, plant)))
            else:
                answers.append((name, plant_id, plant, durable_store.delete(plant_id)))
        return answers

    with held(durable_store, callers, queued):
        contenders = [callers.submit(contend, thread) for thread in range(THREADS)]
        queued.wait_until(at_least(1 + THREADS))
    calls = [call for contender in contenders for call in contender.result(PATIENCE)]

    changes = 1 + len(calls)
    sizes = commits.wait_until(changes_in_all(changes))
    assert sum(sizes) == changes
    assert len(sizes) < changes
    assert max(sizes) >= THREADS
    for plant_id in range(IDS):
        of_id = [(name, plant, answer) for name, i, plant, answer in calls if i == plant_id]
        assert explained(of_id, durable_store.get(plant_id)), of_id
    assert [answer for name, i, _, answer in calls if i >= IDS] == [False] * THREADS


# A batch of changes that conflict gives each the answer a serial order gives it.

FERN = {"name": "fern"}
ROSE = {"name": "rose"}


def etag(client, plant) -> str:
    return client.simulate_put("/plants/1", json=plant).headers["etag"]


def conflicting_requests(config) -> list[tuple[str, str, dict]]:
    """Changes of one id that depend on each other, with a failing one between two that
    succeed, and changes of other ids: (method, path, arguments)."""
    scratch = client_of(config, MemoryStore())
    fern, rose = etag(scratch, FERN), etag(scratch, ROSE)
    return [
        ("POST", "/plants", {"json": {"id": 1, **FERN}}),
        ("POST", "/plants", {"json": {"id": 1, **ROSE}}),
        ("POST", "/plants", {"json": {"id": 1, **FERN}}),
        ("PUT", "/plants/1", {"json": ROSE, "headers": {"If-Match": rose}}),
        ("PUT", "/plants/1", {"json": ROSE, "headers": {"If-Match": fern}}),
        ("DELETE", "/plants/1", {"headers": {"If-Match": fern}}),
        ("DELETE", "/plants/1", {}),
        ("DELETE", "/plants/1", {}),
        ("POST", "/plants", {"json": {"id": 1, "name": "ivy"}}),
        ("DELETE", "/plants/2", {}),
        ("PUT", "/plants/3", {"json": FERN, "headers": {"If-None-Match": "*"}}),
        ("PUT", "/plants/3", {"json": ROSE, "headers": {"If-None-Match": "*"}}),
        ("POST", "/plants", {"json": {"id": 3, **FERN}}),
    ]


def answer_of(result: falcon.testing.Result) -> tuple:
    headers = {name: result.headers.get(name) for name in ("etag", "location")}
    return result.status_code, result.text, headers


@durable
def test_a_batch_of_conflicting_changes_answers_each_as_a_serial_order_does(
    config, durable_store, commits, queued, callers
):
    """One batch: the answers, and what is kept after, are those of the same requests made
    one after another on the memory store. The failing conditions undo nothing but themselves."""
    calls = conflicting_requests(config)
    client = client_of(config, durable_store)
    with held(durable_store, callers, queued):
        answers = queue_in_order(
            callers,
            queued,
            [partial(client.simulate_request, method, path, **kw) for method, path, kw in calls],
        )
    assert commits.wait_until(changes_in_all(1 + len(calls))) == [1, len(calls)]

    serial = client_of(config, MemoryStore())
    expected = [answer_of(serial.simulate_request(m, path, **kw)) for m, path, kw in calls]
    assert [answer_of(answer.result(PATIENCE)) for answer in answers] == expected
    statuses = [200, 409, 200, 412, 200, 412, 204, 404, 200, 404, 201, 412, 200]
    assert [status for status, _, _ in expected] == statuses
    assert client.simulate_get("/plants").json == serial.simulate_get("/plants").json


# The writer's promises: a batch in id order; `close` makes what is queued and under way.

FALLING_IDS = [5, 4, 3, 2, 1]


def test_a_postgresql_batch_makes_its_changes_in_id_order(postgres_url, queued, callers):
    """Writers of other workers and hosts lock rows, and make new ones, in one order, their
    ids: none waits for another in a circle. Changes queued by falling ids make one batch,
    whose events the outbox holds in rising ids."""
    store = open_store(postgres_url, subscribers=["subscriber"])
    try:
        with held(store, callers, queued):
            answers = queue_in_order(
                callers,
                queued,
                [partial(store.add, i, document(f"plant {i}")) for i in FALLING_IDS],
            )
        assert [answer.result(PATIENCE) for answer in answers] == [
            document(f"plant {i}") for i in FALLING_IDS
        ]
        now = time.time()
        deliveries = store.claim("subscriber", now, now + 60, 10)
        assert [json.loads(d.body)["data"]["id"] for d in deliveries] == sorted(FALLING_IDS)
    finally:
        store.close()


@pytest.fixture
def stopping(monkeypatch):
    """Noted when a store's writer is told to close: it then waits for its queue to drain."""
    noted = Noted()

    class WatchedCondition(threading.Condition):
        def wait_for(self, predicate, timeout=None):
            noted(self)
            return super().wait_for(predicate, timeout)

    watched = SimpleNamespace(Lock=threading.Lock, Condition=WatchedCondition)
    monkeypatch.setattr(group_commit, "threading", watched)
    return noted


@durable
def test_close_makes_and_answers_the_changes_queued_and_under_way(
    store_url, queued, stopping, callers
):
    """A worker that exits closes its store while requests wait for their changes: the change
    under way (held by its condition) and those queued behind it are made and answered before
    the store lets its connections go, and the next to open the store finds them."""
    store = open_store(store_url)
    holder = Holder()
    (under_way,) = queue_together(
        callers, queued, [partial(store.put, 1, document("fern"), holder)]
    )
    assert holder.entered.wait(PATIENCE)
    behind = queue_together(
        callers, queued, [partial(store.add, i, document(f"plant {i}")) for i in (2, 3)]
    )
    closed = callers.submit(store.close)
    stopping.wait_until(at_least(1))
    holder.released.set()
    assert under_way.result(PATIENCE) == (Put.CREATED, document("fern"))
    assert [answer.result(PATIENCE) for answer in behind] == [
        document("plant 2"),
        document("plant 3"),
    ]
    closed.result(PATIENCE)
    reopened = open_store(store_url)
    try:
        assert [reopened.get(i) for i in (1, 2, 3)] == [
            document("fern"),
            *(document(f"plant {i}") for i in (2, 3)),
        ]
    finally:
        reopened.close()


def test_a_batch_is_given_what_is_left_to_its_oldest_change(queued, callers):
    """A store bounds its requests' whole wait (PostgreSQL: `REQUEST_SECONDS`), and a change
    may wait for a batch before its own: its write counts from the oldest change's handing
    in, not from when the batch began, nor from the change it makes first."""
    writing_the_first, let_go = threading.Event(), threading.Event()
    batches = []

    def write(changes, deadline):
        if changes == ["first"]:
            writing_the_first.set()
            assert let_go.wait(PATIENCE)
        before_asking = time.monotonic()
        left = deadline - time.monotonic()
        batches.append((list(changes), before_asking, left, time.monotonic()))
        return [None] * len(changes)

    writer = group_commit.GroupCommit(write, wait=PATIENCE)
    answers = [callers.submit(writer.make, "first")]
    assert writing_the_first.wait(PATIENCE)
    before_the_oldest = time.monotonic()
    answers.append(callers.submit(writer.make, "oldest", order=2))
    queued.wait_until(at_least(2))
    after_the_oldest = time.monotonic()
    answers.append(callers.submit(writer.make, "made first", order=1))
    queued.wait_until(at_least(3))
    let_go.set()
    for answer in answers:
        answer.result(PATIENCE)
    writer.close()
    (changes, before_asking, left, after_asking) = batches[1]
    assert changes == ["made first", "oldest"]
    assert PATIENCE - (after_asking - before_the_oldest) <= left
    assert left <= PATIENCE - (before_asking - after_the_oldest)


# A batch whose commit fails answers 503 to each request, and none of its changes is visible.

NEW_PLANTS = [{"id": plant_id, "name": f"plant {plant_id}"} for plant_id in range(10, 15)]


def posts_of(client, plants) -> list[Callable[[], falcon.testing.Result]]:
    return [partial(client.simulate_post, "/plants", json=plant) for plant in plants]


def deletion(client, plant_id: int) -> Callable[[], falcon.testing.Result]:
    return partial(client.simulate_delete, f"/plants/{plant_id}")


def kept_ids(path) -> list[int]:
    """The ids a fresh connection finds in the SQLite file."""
    with sqlite3.connect(path) as connection:
        ids = [id_ for (id_,) in connection.execute("SELECT id FROM plants ORDER BY id")]
    connection.close()
    return ids


@pytest.fixture(params=["log made immutable", "disk full"])
def unwritable(request, tmp_path):
    """Where a SQLite database goes, and a context manager in which its commits fail there."""
    if request.param == "disk full":
        disk = request.getfixturevalue("small_disk")

        @contextmanager
        def broken():
            fill(disk / "filler")
            try:
                yield
            finally:
                (disk / "filler").unlink()

        return disk / "plants.db", broken

    path = tmp_path / "plants.db"
    immutable = request.getfixturevalue("immutable")

    @contextmanager
    def broken():
        immutable(f"{path}-wal")
        try:
            yield
        finally:
            subprocess.run(["chattr", "-i", f"{path}-wal"], check=True)

    return path, broken


def assert_a_batch_broken_before_its_commit_fails_whole(
    config, store: PlantStore, callers: ThreadPoolExecutor, queued: Noted, broken: Callable
) -> None:
    """Keep plant 1; then make new plants and delete plant 1 in one batch, held once they are
    made while `broken()` is entered, and let it commit within that: each answer is 503 (its
    holder's, `StoreUnavailable`), and none of its changes is visible."""
    client = client_of(config, store)
    assert client.simulate_post("/plants", json={"id": 1, **FERN}).status_code == 200
    answers, go_on = held_at_its_end(
        store, callers, queued, [*posts_of(client, NEW_PLANTS), deletion(client, 1)]
    )
    try:
        with broken():
            go_on.set()
            for answer in answers[:-1]:
                assert_unavailable(answer.result(PATIENCE))
            with pytest.raises(StoreUnavailable):
                answers[-1].result(PATIENCE)
    finally:
        go_on.set()
    assert client.simulate_get("/plants").json == [{"id": 1, **FERN}]


def test_a_sqlite_batch_whose_commit_fails_answers_503_to_each_and_keeps_none(
    config, unwritable, commits, queued, callers
):
    """The file system refuses the log its writes once the batch's changes are made: the
    commit, which writes them there, fails. The store serves again once it takes them."""
    path, broken = unwritable
    store = SqliteStore(str(path), on_commit=commits)
    try:
        assert_a_batch_broken_before_its_commit_fails_whole(config, store, callers, queued, broken)
        assert store.add(2, document("rose")) == document("rose")
    finally:
        store.close()
    assert commits.items == [1, 1, 1]
    assert kept_ids(path) == [1, 2]


def test_a_sqlite_batch_that_waits_past_its_bound_for_the_lock_answers_503_to_each(
    config, tmp_path, commits, queued, callers, caplog
):
    """Another process's transaction holds SQLite's write lock longer than the store waits."""
    path = tmp_path / "plants.db"
    store = SqliteStore(str(path), busy_timeout=1.0, on_commit=commits)
    client = client_of(config, store)
    other_process = sqlite3.connect(path, isolation_level=None)
    try:
        assert client.simulate_post("/plants", json={"id": 1, **FERN}).status_code == 200
        with writers_lock_held(path):
            answers = queue_together(callers, queued, posts_of(client, NEW_PLANTS))
            other_process.execute("BEGIN IMMEDIATE")
        for answer in answers:
            assert_unavailable(answer.result(PATIENCE))
        other_process.execute("ROLLBACK")
        assert client.simulate_get("/plants").json == [{"id": 1, **FERN}]
    finally:
        other_process.close()
        store.close()
    # The batch began, and failed: no request gave up waiting for it to begin.
    assert "database is locked" in caplog.text
    assert "no write could begin" not in caplog.text
    assert commits.items == [1]
    assert kept_ids(path) == [1]


def postgres_ids(url) -> list[int]:
    with psycopg.connect(url) as connection:
        return [plant_id for (plant_id,) in connection.execute("SELECT id FROM plants ORDER BY id")]


def test_a_postgresql_batch_whose_session_ends_mid_batch_answers_503_to_each_and_keeps_none(
    config, postgres_url, commits, queued, callers
):
    """The server ends the writer's session (as a restart, or an administrator, would) after
    the batch's first changes were made, in its transaction."""
    store = PostgresStore(postgres_url, on_commit=commits)

    @contextmanager
    def session_ended():
        with psycopg.connect(postgres_url, autocommit=True) as administrator:
            ended = administrator.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = current_database() AND xact_start IS NOT NULL "
                "AND pid <> pg_backend_pid()"
            ).fetchall()
        assert ended == [(True,)]
        yield

    try:
        assert_a_batch_broken_before_its_commit_fails_whole(
            config, store, callers, queued, session_ended
        )
    finally:
        store.close()
    assert commits.items == [1, 1]
    assert postgres_ids(postgres_url) == [1]


def test_a_postgresql_change_waits_only_for_the_rows_it_touches(
    config, postgres_url, commits, queued, callers
):
    """Another session holds the row of a plant that a batch's last change deletes, longer
    than a request may wait: the batch's other changes are made and answered at once, while
    the row is still held, and only the delete waits for it, until its own bound (503)."""
    store = PostgresStore(postgres_url, on_commit=commits)
    client = client_of(config, store)
    try:
        assert client.simulate_post("/plants", json={"id": 20, **FERN}).status_code == 200
        with psycopg.connect(postgres_url) as other_session:
            other_session.execute("SELECT id FROM plants WHERE id = 20 FOR UPDATE")
            with held(store, callers, queued):
                *creates, delete = queue_together(
                    callers,
                    queued,
                    [*posts_of(client, NEW_PLANTS), deletion(client, 20)],
                )
            assert [create.result(PATIENCE).status_code for create in creates] == [200] * 5
            assert not delete.done()
            assert_unavailable(delete.result(PATIENCE))
        assert postgres_ids(postgres_url) == [plant["id"] for plant in NEW_PLANTS] + [20]
    finally:
        store.close()
    assert commits.items == [1, 1, 5]


# No request is answered before its batch's commit returned.

PLANTS = [(plant_id, document(f"plant {plant_id}")) for plant_id in range(10, 15)]


@pytest.fixture
def freezable_disk(tmp_path):
    """A file system of the test's own (ext4 in a file), which it may freeze; skipped where
    this process may not make and mount one."""
    image, mountpoint = tmp_path / "disk.img", tmp_path / "disk"
    mountpoint.mkdir()
    with open(image, "wb") as disk:
        disk.truncate(16 * 1024 * 1024)
    for command in [["mkfs.ext4", "-q", image], ["mount", "-o", "loop", image, mountpoint]]:
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode != 0:
            pytest.skip(f"cannot make a file system to freeze: {done.stderr.strip()}")
    yield mountpoint
    subprocess.run(["umount", mountpoint], check=True)


@contextmanager
def frozen(mountpoint) -> Iterator[None]:
    """Freeze the file system (`fsfreeze`): every write to it, and every sync, waits until the
    block ends, as a disk that takes its time would make them wait."""
    done = subprocess.run(["fsfreeze", "--freeze", mountpoint], capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot freeze a file system: {done.stderr.strip()}")
    try:
        yield
    finally:
        subprocess.run(["fsfreeze", "--unfreeze", mountpoint], check=True)


def waits_in_the_kernel() -> bool:
    """Whether a thread of this process sleeps uninterruptibly (`D`), as one waiting on a
    frozen file system does: the thread of the request that leads the batch."""
    for thread in threading.enumerate():
        with open(f"/proc/self/task/{thread.native_id}/stat") as stat:
            if stat.read().rsplit(")", 1)[1].split()[0] == "D":
                return True
    return False


def answered(waiter: group_commit.Waiter) -> bool:
    return waiter.turn is group_commit.Turn.DONE


def test_no_sqlite_change_is_answered_before_its_batchs_commit_returned(
    freezable_disk, queued, callers
):
    """The file system is frozen once the batch's changes are made: its commit, which writes
    them to the log and syncs it, waits; the test sees it wait, and no answer given."""
    store = SqliteStore(str(freezable_disk / "plants.db"))
    try:
        adds = [partial(store.add, *plant) for plant in PLANTS]
        answers, go_on = held_at_its_end(store, callers, queued, adds)
        batch = queued.items[-len(answers) :]
        try:
            with frozen(freezable_disk):
                go_on.set()
                deadline = time.monotonic() + PATIENCE
                while not waits_in_the_kernel():
                    assert time.monotonic() < deadline, "the commit never waited for the disk"
                assert not any(map(answered, batch))
                assert not any(answer.done() for answer in answers)
        finally:
            go_on.set()
        assert [answer.result(PATIENCE) for answer in answers] == [
            *(plant for _, plant in PLANTS),
            False,
        ]
    finally:
        store.close()


#: The advisory lock that the test holds to hold a commit (`HOLD_COMMITS`).
COMMIT_LOCK = 0x686F6C64
#: A check PostgreSQL makes at each commit of a new plant: it waits for `COMMIT_LOCK`.
HOLD_COMMITS = hold_commits_sql(COMMIT_LOCK)
WAITING_FOR_THE_LOCK = (
    "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted "
    "AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
)


def test_no_postgresql_change_is_answered_before_its_batchs_commit_returned(
    postgres_url, queued, callers
):
    """The batch's commit runs the check of its new plants, which waits for a lock the test
    holds; the test sees it wait, no answer given and no plant visible. It lets the commit go
    before the store's bound on a statement (`STATEMENT_SECONDS`) would end it."""
    store = PostgresStore(postgres_url)
    try:
        with psycopg.connect(postgres_url, autocommit=True) as test:
            test.execute(HOLD_COMMITS)
            with held(store, callers, queued):
                answers = queue_together(
                    callers, queued, [partial(store.add, *plant) for plant in PLANTS]
                )
                test.execute("SELECT pg_advisory_lock(%s)", (COMMIT_LOCK,))
            batch = queued.items[-len(answers) :]
            deadline = time.monotonic() + PATIENCE
            while test.execute(WAITING_FOR_THE_LOCK).fetchone() == (0,):
                assert time.monotonic() < deadline, "the commit never waited for the lock"
            assert not any(map(answered, batch))
            assert not any(answer.done() for answer in answers)
            assert test.execute("SELECT count(*) FROM plants").fetchone() == (0,)
            test.execute("SELECT pg_advisory_unlock(%s)", (COMMIT_LOCK,))
            assert [answer.result(PATIENCE) for answer in answers] == [p for _, p in PLANTS]
    finally:
        store.close()


# Reads never wait behind a batch.


@durable
def test_reads_are_answered_while_a_batch_is_under_way(durable_store, callers, queued):
    """A read takes no turn at the writer: held in the middle of a batch, with changes queued
    behind it, the writer holds up no `get` and no page."""
    durable_store.add(1, b'{"name":"fern"}')
    with held(durable_store, callers, queued):
        (waiting,) = queue_together(
            callers, queued, [partial(durable_store.add, 2, b'{"name":"ivy"}')]
        )
        assert durable_store.get(1) == b'{"name":"fern"}'
        assert durable_store.page(None, 10, None, 4096).plants == [(1, b'{"name":"fern"}')]
        assert not waiting.done()
    assert waiting.result(PATIENCE) == b'{"name":"ivy"}'


# The bounds a batch is held to, each as a store must take it.


def test_a_change_whose_request_gave_up_counts_nothing_in_its_batchs_bound(queued, callers):
    """A change whose request stopped waiting before its batch began is not made, and the
    batch that follows is held to what is left to its oldest change actually taken."""
    wait = 0.5
    writing_the_first, let_go = threading.Event(), threading.Event()
    deadlines = {}

    def write(changes, deadline):
        if changes == ["first"]:
            writing_the_first.set()
            assert let_go.wait(PATIENCE)
        deadlines[tuple(changes)] = deadline
        return [None] * len(changes)

    writer = group_commit.GroupCommit(write, wait=wait)
    first = callers.submit(writer.make, "first")
    assert writing_the_first.wait(PATIENCE)
    gave_up = callers.submit(writer.make, "given up")
    with pytest.raises(StoreUnavailable):
        gave_up.result(PATIENCE)
    before_the_fresh = time.monotonic()
    fresh = callers.submit(writer.make, "fresh")
    queued.wait_until(at_least(3))
    let_go.set()
    assert first.result(PATIENCE) is None
    assert fresh.result(PATIENCE) is None
    writer.close()
    assert list(deadlines) == [("first",), ("fresh",)]
    assert deadlines["fresh",] >= before_the_fresh + wait


def test_a_postgresql_batch_bounds_its_own_transaction_alone(postgres_url):
    """A batch lets its statements wait what is left of its requests' bound (seconds) for its
    transaction alone: the connection goes back to the pool with the session's bound
    (`STATEMENT_SECONDS`), which a read that waits for a table's lock then meets."""
    store = PostgresStore(postgres_url)
    try:
        store.add(1, document("fern"))
        with psycopg.connect(postgres_url) as other_session:
            other_session.execute("LOCK TABLE plants IN ACCESS EXCLUSIVE MODE")
            began = time.monotonic()
            with pytest.raises(StoreUnavailable, match="statement timeout"):
                store.get(1)
            assert time.monotonic() - began < STATEMENT_SECONDS + 1
    finally:
        store.close()


def test_a_postgresql_batch_inserts_its_new_ids_in_id_order_whatever_order_they_come_in(
    postgres_url,
):
    """Two batches inserting the same new ids wait for each other's inserts in one order, so
    never in a circle: the statement itself inserts in id order, not only the queue's sort (a
    fresh table keeps its rows where they were inserted, in the order of `ctid`)."""
    with psycopg.connect(postgres_url, autocommit=True) as connection:
        migrate(connection)
        changes = [Add(plant_id, document(f"plant {plant_id}")) for plant_id in (3, 1, 2)]
        make_batch(connection, changes, (), statement_seconds=STATEMENT_SECONDS)
        inserted = connection.execute("SELECT id FROM plants ORDER BY ctid").fetchall()
    assert inserted == [(1,), (2,), (3,)]


def test_a_postgresql_batch_keeps_plants_that_read_like_its_own_statements(postgres_url):
    """A batch's statements go as one query, their parameters bound into it: a plant holding
    quotes, placeholders, a statement's end and a comment is kept and read back byte for byte,
    and nothing else is run."""
    names = ["%s", "%(ids)s", "'; COMMIT; DELETE FROM plants; --", 'a\\"b\\\\', "é 🌱 $1"]
    with psycopg.connect(postgres_url, autocommit=True) as connection:
        migrate(connection)
        changes = [Add(n, document(name, tag=name)) for n, name in enumerate(names)]
        make_batch(connection, changes, ("subscriber",), statement_seconds=STATEMENT_SECONDS)
        kept = connection.execute("SELECT id, plant::text FROM plants ORDER BY id").fetchall()
        events = connection.execute("SELECT count(*) FROM events").fetchone()[0]
    assert kept == [(n, document(name, tag=name).decode()) for n, name in enumerate(names)]
    assert events == len(names)


def test_a_sqlite_batch_waits_for_a_write_lock_what_is_left_of_its_bound(tmp_path):
    """Another connection holds the write lock for 200 ms: the batch waits for it, as long as
    its bound allows (SQLite takes its busy timeout in milliseconds), and its change is made."""
    path = tmp_path / "plants.db"
    store = SqliteStore(str(path))
    other = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    try:
        other.execute("BEGIN IMMEDIATE")
        let_go = threading.Timer(0.2, other.execute, ["COMMIT"])
        began = time.monotonic()
        let_go.start()
        assert store.add(1, document("fern")) == document("fern")
        assert time.monotonic() - began >= 0.2
        let_go.join()
    finally:
        other.close()
        store.close()
