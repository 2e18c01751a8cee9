"""Over loopback: the real gunicorn, against the floor app under the same settings.

The server is pinned to one CPU and the load generator to another, so neither steals the
other's time; runs take turns, A/B/A/B, and each figure is the median of its runs.
"""

import os
import statistics
import tempfile
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import TypeVar

from bench.environs import TOKEN
from bench.load import Creates, LoadResult, Reads, Replaces, Revalidations, Workload, python_load
from bench.server import WARM_UP_REQUESTS, Listener, Peer, Server, server_environ
from bench.stock import document
from bench.wrk import ensure_wrk, wrk_load
from plantstore.api.conditions import etag_of
from plantstore.tokens.file import line_for

_Key = TypeVar("_Key")

#: Ids of each run start this far apart, so every request of a run creates a plant.
IDS_PER_RUN = 100_000_000
#: What warms a server up unless told otherwise: creates, with ids no measured run uses.
CREATES_BEFORE = Creates(-WARM_UP_REQUESTS)
#: The ids of the plants `CREATES_BEFORE` leaves in every server, each `plant_body(id)`.
WARMED_UP = tuple(range(CREATES_BEFORE.first_id, CREATES_BEFORE.first_id + WARM_UP_REQUESTS))
#: Reads of the warmed-up plants, each in turn, answered 200.
READS = Reads(tuple(f"/plants/{plant_id}" for plant_id in WARMED_UP))
#: The same reads as a cache revalidates what it holds, answered 304: the `ETag` of a plant is
#: that of the document the service keeps for `plant_body(id)`, tagged tree.
REVALIDATIONS = Revalidations(
    READS.paths, tuple(etag_of(document(plant_id, "tree")) for plant_id in WARMED_UP)
)


@dataclass(frozen=True)
class Figures:
    """The medians of one load's runs."""

    per_second: float
    p50_us: float
    p99_us: float
    runs: list[LoadResult]

    @classmethod
    def of(cls, runs: list[LoadResult]) -> "Figures":
        return cls(
            per_second=statistics.median(run.per_second for run in runs),
            p50_us=statistics.median(run.p50_us for run in runs),
            p99_us=statistics.median(run.p99_us for run in runs),
            runs=runs,
        )

    @property
    def valid(self) -> bool:
        return all(run.valid for run in self.runs)


@dataclass(frozen=True)
class Setup:
    """Where server and load run, and how the load is made."""

    server_cpu: int | None
    load_cpu: int | None
    generator: str
    load: Callable[..., LoadResult]


@dataclass(frozen=True)
class Served:
    """A server to start: the environment overrides and gunicorn arguments it differs by, and
    what is sent to it before any run.
    """

    overrides: dict[str, str] = field(default_factory=dict)
    args: tuple[str, ...] = ()
    warm_up: Workload = CREATES_BEFORE

    def start(self, cpu: int | None) -> Listener:
        return Server(cpu, server_environ(**self.overrides), *self.args)


@dataclass(frozen=True)
class ServedPeer:
    """The peer to start (`bench.peer`, under uvicorn), and what is sent to it before any run."""

    warm_up: Workload = CREATES_BEFORE

    def start(self, cpu: int | None) -> Listener:
        return Peer(cpu)


#: What the service's creates are measured beside: the floor, served under the same settings,
#: and the peer.
FLOOR = "floor"
PEER = "fastapi + uvicorn"
REFERENCES = {FLOOR: Served(args=("bench.floor:app",)), PEER: ServedPeer()}
#: The memory store served with the bench's token in a tokens file (`tokens_file`), its
#: creates measured beside those of the memory store whose token is in `PLANTSTORE_TOKENS`.
TOKENS_FILE = "memory, file token"
#: What the bench's token may do when it comes from the tokens file: what creates need.
TOKEN_SCOPES = "write"


@dataclass(frozen=True)
class Load:
    """What one figure measures: the server loaded, and the workload of each round."""

    server: str
    workload: Callable[[int], Workload]


def creates(round_number: int) -> Creates:
    """Every request of every run creates a plant."""
    return Creates((round_number + 1) * IDS_PER_RUN)


def replaces(round_number: int) -> Replaces:
    """Every request renames one of the warmed-up plants, with a name no other request sends."""
    return Replaces(WARMED_UP, (round_number + 1) * IDS_PER_RUN)


def choose_setup(generator: str) -> Setup:
    """Pin to the first two CPUs we may use (none pinned on a one-CPU machine); prefer wrk."""
    cpus = sorted(os.sched_getaffinity(0))
    server_cpu, load_cpu = (cpus[0], cpus[1]) if len(cpus) > 1 else (None, None)
    wrk = ensure_wrk() if generator == "wrk" else None
    if wrk:
        return Setup(server_cpu, load_cpu, "wrk", partial(wrk_load, wrk))
    return Setup(server_cpu, load_cpu, "python", python_load)


def as_served(setup: Setup) -> Setup:
    """`setup` with nothing pinned: the service as `plantstore serve` runs it on this machine (a
    worker a core with a shared store), PostgreSQL and the load generator on the same cores."""
    return replace(setup, server_cpu=None, load_cpu=None)


@contextmanager
def pinned(cpu: int | None) -> Iterator[None]:
    """Run this process (and the processes it starts) on `cpu` only, for a while."""
    before = os.sched_getaffinity(0)
    if cpu is not None:
        os.sched_setaffinity(0, {cpu})
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)


def compare(
    setup: Setup,
    servers: dict[str, Served | ServedPeer],
    loads: dict[_Key, Load],
    rounds: int,
    seconds: int,
    connections: int,
) -> dict[_Key, Figures]:
    """Start every server, then run each load in turn for `rounds` rounds; give their medians.

    Loads take turns within each round, in reversed order every other round, so that whatever
    else the machine does falls on all of them alike.
    """
    with ExitStack() as stack:
        running = {
            name: stack.enter_context(served.start(setup.server_cpu))
            for name, served in servers.items()
        }
        for name, server in running.items():
            server.warm_up(servers[name].warm_up)
        runs: dict[_Key, list[LoadResult]] = {name: [] for name in loads}
        with pinned(setup.load_cpu):
            for round_number in range(rounds):
                order = list(loads) if round_number % 2 == 0 else list(loads)[::-1]
                for name in order:
                    port = running[loads[name].server].port
                    workload = loads[name].workload(round_number)
                    runs[name].append(setup.load(port, workload, seconds, connections))
    return {name: Figures.of(results) for name, results in runs.items()}


def stores(tmp: str, postgres_url: str | None) -> dict[str, dict[str, str]]:
    """The stores served from, each as the environment that selects it.

    PostgreSQL joins when there is a database to serve from (see `bench.postgres`).
    """
    selected = {"memory": {}, "sqlite": {"PLANTSTORE_STORE": f"sqlite:///{tmp}/plants.db"}}
    if postgres_url is not None:
        selected["postgresql"] = {"PLANTSTORE_STORE": postgres_url}
    return selected


def tokens_file(directory: str) -> dict[str, str]:
    """Write a tokens file in `directory` that accepts the bench's token; give the environment
    that serves it.

    Its one line is the token's digest, named `bench`, with `TOKEN_SCOPES`: the line `plantstore
    token` prints for a token it makes, as a deployed tokens file holds them.
    """
    path = Path(directory) / "tokens"
    path.write_text(line_for(TOKEN, "bench", TOKEN_SCOPES) + "\n")
    return {"PLANTSTORE_TOKENS_FILE": str(path)}


def beside_floor(
    setup: Setup,
    postgres_url: str | None,
    workloads: dict[str, Callable[[int], Workload]],
    rounds: int,
    seconds: int,
    connections: int,
    references: tuple[str, ...] = (FLOOR,),
    file_token: bool = False,
) -> tuple[dict[str, Figures], dict[str, dict[str, Figures]]]:
    """The creates of each of `references` (of `REFERENCES`: the floor app under
    `gunicorn.conf.py`, the peer), and each of `workloads` on the service on each store, under
    `gunicorn.conf.py` too: the references' figures, and each store's by workload.

    With `file_token`, the creates of the memory store served with its token from a tokens file
    join the references' figures, as `TOKENS_FILE`.

    The workloads of a store take turns on one server, so they share its plants: those of the
    warm-up, and those the creates add.
    """
    with tempfile.TemporaryDirectory() as tmp:
        servers: dict[str, Served | ServedPeer] = {name: REFERENCES[name] for name in references}
        if file_token:
            servers[TOKENS_FILE] = Served(tokens_file(tmp))
        beside = tuple(servers)
        loads = {(name, "creates"): Load(name, creates) for name in beside}
        for store, environ in stores(tmp, postgres_url).items():
            servers[store] = Served(environ)
            loads.update({(store, name): Load(store, made) for name, made in workloads.items()})
        figures = compare(setup, servers, loads, rounds, seconds, connections)
    by_store: dict[str, dict[str, Figures]] = {}
    for (server, name), measured in figures.items():
        if server not in beside:
            by_store.setdefault(server, {})[name] = measured
    return {name: figures[name, "creates"] for name in beside}, by_store


def tail(
    setup: Setup, plants: int, rounds: int, seconds: int, connections: int
) -> dict[str, Figures]:
    """The service with an empty memory store against one holding `plants` plants.

    Both are `bench.preloaded:app`, loaded before the fork (`--preload`) so that filling the
    store is not cut short by the worker timeout; only the store's size differs. The empty one
    keeps what earlier runs created, a few per cent of the full one's plants by the last run.
    """
    preloaded = ("--preload", "bench.preloaded:app")
    servers = {
        "empty": Served({"BENCH_PLANTS": "0"}, preloaded),
        f"{plants:,} plants": Served({"BENCH_PLANTS": str(plants)}, preloaded),
    }
    loads = {name: Load(name, creates) for name in servers}
    return compare(setup, servers, loads, rounds, seconds, connections)
