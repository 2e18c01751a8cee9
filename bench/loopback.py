"""Over loopback: the real gunicorn, against the floor app under the same settings.

The server is pinned to one CPU and the load generator to another, so neither steals the
other's time; runs take turns, A/B/A/B, and each figure is the median of its runs.
"""

import os
import statistics
import tempfile
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from functools import partial

from bench.load import LoadResult, python_load
from bench.server import Server, server_environ
from bench.wrk import ensure_wrk, wrk_load

#: The stores served from, each as the environment that selects it (`{tmp}`: a fresh folder).
#: PostgreSQL is left out: it would need a server of its own, which the bench does not start.
STORES = {"memory": {}, "sqlite": {"PLANTSTORE_STORE": "sqlite:///{tmp}/plants.db"}}

#: Ids of each run start this far apart, so every request of a run creates a plant.
IDS_PER_RUN = 100_000_000


@dataclass(frozen=True)
class Figures:
    """The medians of one server's runs."""

    per_second: float
    p50_us: float
    p99_us: float
    runs: list[LoadResult]

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


def choose_setup(generator: str) -> Setup:
    """Pin to the first two CPUs we may use (none pinned on a one-CPU machine); prefer wrk."""
    cpus = sorted(os.sched_getaffinity(0))
    server_cpu, load_cpu = (cpus[0], cpus[1]) if len(cpus) > 1 else (None, None)
    wrk = ensure_wrk() if generator == "wrk" else None
    if wrk:
        return Setup(server_cpu, load_cpu, "wrk", partial(wrk_load, wrk))
    return Setup(server_cpu, load_cpu, "python", python_load)


@contextmanager
def pinned(cpu: int | None) -> Iterator[None]:
    """Run this process (and the load generators it starts) on `cpu` only, for a while."""
    before = os.sched_getaffinity(0)
    if cpu is not None:
        os.sched_setaffinity(0, {cpu})
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)


def compare(
    setup: Setup,
    servers: dict[str, tuple[dict, list[str]]],
    rounds: int,
    seconds: int,
    connections: int,
) -> dict[str, Figures]:
    """Start every server, then load each in turn for `rounds` rounds; give their medians.

    `servers` maps a name to the environment overrides and gunicorn arguments of a server.
    """
    with ExitStack() as stack, tempfile.TemporaryDirectory() as tmp:
        running = {}
        for name, (overrides, args) in servers.items():
            environ = server_environ(**{k: v.format(tmp=tmp) for k, v in overrides.items()})
            running[name] = stack.enter_context(Server(setup.server_cpu, environ, *args))
        for server in running.values():
            server.warm_up()
        runs: dict[str, list[LoadResult]] = {name: [] for name in running}
        with pinned(setup.load_cpu):
            for round_number in range(rounds):
                order = list(running) if round_number % 2 == 0 else list(running)[::-1]
                for name in order:
                    first_id = (round_number + 1) * IDS_PER_RUN
                    runs[name].append(
                        setup.load(running[name].port, first_id, seconds, connections)
                    )
    return {
        name: Figures(
            per_second=statistics.median(run.per_second for run in results),
            p50_us=statistics.median(run.p50_us for run in results),
            p99_us=statistics.median(run.p99_us for run in results),
            runs=results,
        )
        for name, results in runs.items()
    }


def throughput(setup: Setup, rounds: int, seconds: int, connections: int) -> dict[str, Figures]:
    """The floor app and the service on each store, all under `gunicorn.conf.py`."""
    servers = {"floor": ({}, ["bench.floor:app"])}
    servers.update({store: (environ, []) for store, environ in STORES.items()})
    return compare(setup, servers, rounds, seconds, connections)


def tail(
    setup: Setup, plants: int, rounds: int, seconds: int, connections: int
) -> dict[str, Figures]:
    """The service with an empty memory store against one holding `plants` plants.

    Both are `bench.preloaded:app`, loaded before the fork (`--preload`) so that filling the
    store is not cut short by the worker timeout; only the store's size differs. The empty one
    keeps what earlier runs created, a few per cent of the full one's plants by the last run.
    """
    preloaded = ["--preload", "bench.preloaded:app"]
    servers = {
        "empty": ({"BENCH_PLANTS": "0"}, preloaded),
        f"{plants:,} plants": ({"BENCH_PLANTS": str(plants)}, preloaded),
    }
    return compare(setup, servers, rounds, seconds, connections)
