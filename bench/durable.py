"""Durability as users run it: creates, replaces and deletes over loopback on the durable
stores, each beside the memory store in the same rounds, at 8 and at 64 connections.

SQLite keeps the store's own `synchronous = FULL`; PostgreSQL is a cluster of the bench's own
with `fsync` and `synchronous_commit` on (`bench.postgres`). Both keep their files in the
temporary directory. Every server is `gunicorn -c gunicorn.conf.py`, one a store for the whole
part; loads take turns within each round, in reversed order every other round, and each figure
is the median of its rounds.

Creates send a fresh id each request, as `loopback` does; replaces rename the plants of the
warm-up in turn, a fresh name each request, as `loopback.replaces` does. Deletes delete plants
the store
holds, each once: before each delete run the bench lists, through the service's own pages, the
plants that no delete run was given yet (most come from the create runs). When they are fewer
than twice the most requests a measured run on that server answered, it first creates more
(unmeasured: `seconds` of creates at the most connections), as a store may delete faster than
it creates. A delete run that still ran out sends plants again, which answer 404 and make it
invalid.

Commits per acknowledged change: how much the service's `plantstore_store_commits_total` grew
over each run, against its `plantstore_store_changes_total`, both read from its `/metrics`,
summed over their labels and over the rounds. A store that batches its changes commits less
than once a change; where the service does not count them there is no figure.

Creates and replaces are counted too (`bench.counts`): the service's CPU a request on every
store, and on PostgreSQL the cluster's CPU, transactions, statements and round trips a request.
"""

import subprocess
import tempfile
import time
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass
from functools import partial

import orjson
from prometheus_client.parser import text_string_to_metric_families

from bench.counts import Counter, Postgres, Tally
from bench.environs import READER, InvalidRun
from bench.load import Creates, Deletes, LoadResult, Replaces, Workload
from bench.loopback import CREATES_BEFORE, IDS_PER_RUN, WARMED_UP, Figures, Setup, pinned, stores
from bench.server import Server, server_environ

CONNECTIONS = (8, 64)
#: The PostgreSQL database served from.
DATABASE = "plants_durable"
CASES = ("creates", "replaces", "deletes")
#: The cases whose runs are counted (`bench.counts`).
COUNTED = ("creates", "replaces")
#: The least share of the memory store's creates a second, at each connection count.
CREATES_TARGETS = {8: 0.60, 64: 0.80}
#: The most a durable store's p99 may be, as a multiple of the memory store's.
P99_TARGET = 3
#: The least a store's replaces a second may be, as a multiple of its creates'.
REPLACES_TARGET = 0.9
#: At 64 connections: the most CPU of the service a durable store's create may cost, as a
#: multiple of the memory store's, and the most transactions and round trips a create may cost
#: PostgreSQL.
SERVICE_CPU_TARGET, TRANSACTIONS_TARGET, ROUND_TRIPS_TARGET = 1.3, 0.35, 0.5
COMMITS, CHANGES = "plantstore_store_commits_total", "plantstore_store_changes_total"
#: Plants a page of the listing holds: the most `GET /plants` gives.
PAGE = 1000
#: Times a page is asked for while the service answers 503.
ASKS = 30


def filesystem(path: str) -> str:
    """The type of the file system holding `path`, as `stat` names it: `ext2/ext3`, `tmpfs`…"""
    done = subprocess.run(
        ["stat", "--file-system", "--format=%T", path], capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


def store_counters(metrics: str) -> dict[str, float]:
    """The commits and changes of a scrape of `/metrics`, each summed over its label sets; a
    counter the service does not have is left out.
    """
    totals: dict[str, float] = {}
    for family in text_string_to_metric_families(metrics):
        for sample in family.samples:
            if sample.name in (COMMITS, CHANGES):
                totals[sample.name] = totals.get(sample.name, 0) + sample.value
    return totals


@dataclass
class Commits:
    """The commits and changes that one load's runs added, if the service counted both."""

    commits: float = 0
    changes: float = 0
    counted: bool = True

    def add(self, before: dict[str, float], after: dict[str, float]) -> None:
        """Add a run's, from the scrapes before and after it. A counter the service has shows
        no sample until it counts (one of each set of labels, in multiprocess mode): missing
        before the run and there after, it counted from nothing.
        """
        if {COMMITS, CHANGES} <= after.keys():
            self.commits += after[COMMITS] - before.get(COMMITS, 0)
            self.changes += after[CHANGES] - before.get(CHANGES, 0)
        else:
            self.counted = False

    @property
    def per_change(self) -> float | None:
        return self.commits / self.changes if self.counted and self.changes else None


def scrape(server: Server) -> dict[str, float]:
    status, _, body = server.request("GET", "/metrics", headers=READER)
    if status != 200:
        raise InvalidRun(f"GET /metrics answered {status}, not 200")
    return store_counters(body.decode())


class Plants:
    """The plants of one server: fresh ids to create, names to replace the warm-up's with, and
    stored plants to delete, each once.
    """

    def __init__(self, server: Server, load: Callable[..., LoadResult], seconds: int) -> None:
        self._server = server
        self._load = load
        self._seconds = seconds
        self._runs = 0
        #: No plant with this id or a lower one is given to a delete run: it was given to one
        #: before, or it warmed the server up.
        self._given = 0
        #: The most requests a measured run on this server answered.
        self._most = 0

    def creates(self) -> Creates:
        """The ids of a new run of creates: each run's start `IDS_PER_RUN` above the last's."""
        self._runs += 1
        return Creates(self._runs * IDS_PER_RUN)

    def replaces(self) -> Replaces:
        """A new run of replaces of the plants of the warm-up: each run's names start
        `IDS_PER_RUN` versions above the last run's.
        """
        self._runs += 1
        return Replaces(WARMED_UP, self._runs * IDS_PER_RUN)

    def deletes(self) -> Deletes:
        """Every stored plant no delete run was given: at least twice as many as the most
        requests a measured run answered, once more are created when there are fewer.
        """
        ids = self._stored()
        while not ids or len(ids) < 2 * self._most:
            created = self.creates()
            seeded = self._load(self._server.port, created, self._seconds, max(CONNECTIONS))
            if not seeded.valid:
                raise InvalidRun(f"creating plants to delete from id {created.first_id} failed")
            ids = self._stored()
        return Deletes(tuple(ids))

    def ran(self, workload: Workload, run: LoadResult, connections: int) -> None:
        """Note a measured run: of deletes, every plant it may have sent is given, those
        answered, one in flight on each connection at the end, and the one wrk sends to check
        its script.
        """
        self._most = max(self._most, run.requests)
        if isinstance(workload, Deletes):
            self._given = workload.ids[min(len(workload.ids), run.requests + connections + 1) - 1]

    def _stored(self) -> list[int]:
        """The ids of the stored plants above `_given`, in ascending order, page by page."""
        ids: list[int] = []
        while page := self._page(ids[-1] if ids else self._given):
            ids += page
        return ids

    def _page(self, after: int) -> list[int]:
        """The ids of a page, asked for as a client would: again after a 503, once its
        `Retry-After` has passed. The service may answer so just after a run: the store still
        busy with its last requests, every slot of the worker's store taken (`GatedStore`).
        """
        path = f"/plants?limit={PAGE}&after={after}"
        for _ in range(ASKS):
            status, headers, body = self._server.request("GET", path, headers=READER)
            if status == 200:
                return [plant["id"] for plant in orjson.loads(body)]
            if status != 503:
                break
            time.sleep(int(headers["retry-after"]))
        raise InvalidRun(f"GET {path} answered {status}, not 200")


@dataclass(frozen=True)
class Measured:
    """The figures of one load, the commits its runs made a change (None: not counted), and
    what its runs made the service and the database do (None: a case not counted).
    """

    figures: Figures
    commits_per_change: float | None
    counts: Tally | None


def workload_of(plants: Plants, case: str) -> Workload:
    if case == "creates":
        return plants.creates()
    if case == "replaces":
        return plants.replaces()
    return plants.deletes()


def measure(
    setup: Setup, postgres_url: str | None, postgres: Postgres | None, rounds: int, seconds: int
) -> dict[int, dict[str, dict[str, Measured]]]:
    """By connection count, case and store: the figures of its runs, the commits a change, and
    the counts of the cases `COUNTED`.

    The stores are memory, SQLite and, with `postgres_url`, PostgreSQL (`bench.loopback.stores`),
    whose database `postgres` counts.
    """
    with tempfile.TemporaryDirectory() as tmp, ExitStack() as stack:
        servers = {
            store: stack.enter_context(Server(setup.server_cpu, server_environ(**environ)))
            for store, environ in stores(tmp, postgres_url).items()
        }
        plants, counters = {}, {}
        for store, server in servers.items():
            server.warm_up(CREATES_BEFORE)
            plants[store] = Plants(server, setup.load, seconds)
            counters[store] = Counter(server, postgres if store == "postgresql" else None)
        loads = [(c, case, store) for c in CONNECTIONS for case in CASES for store in servers]
        runs: dict[tuple[int, str, str], list[LoadResult]] = {load: [] for load in loads}
        commits = {load: Commits() for load in loads}
        tallies = {load: Tally() for load in loads if load[1] in COUNTED}
        with pinned(setup.load_cpu):
            for round_number in range(rounds):
                for load in loads if round_number % 2 == 0 else loads[::-1]:
                    connections, case, store = load
                    server, made, counter = servers[store], plants[store], counters[store]
                    counter.settle()
                    workload = workload_of(made, case)
                    before = scrape(server)
                    run = counter.run(
                        partial(setup.load, server.port, workload, seconds, connections),
                        tallies.get(load),
                    )
                    commits[load].add(before, scrape(server))
                    made.ran(workload, run, connections)
                    runs[load].append(run)
            for counter in counters.values():
                counter.settle()
    measured: dict[int, dict[str, dict[str, Measured]]] = {}
    for load, results in runs.items():
        connections, case, store = load
        figures = Measured(Figures.of(results), commits[load].per_change, tallies.get(load))
        measured.setdefault(connections, {}).setdefault(case, {})[store] = figures
    return measured
