"""Feed page cost: `GET /events?limit=100` beside `GET /plants?limit=100` on the same server,
and from a feed of 1,000 events against one of 1,000,000; over loopback, on every store.

Each server's store holds plants 0 to N - 1 (`bench.stock`) and the feed of their creation, one
event a plant in id order: SQLite and PostgreSQL filled by bulk SQL, the memory store by
`bench.preloaded:app` as it starts. So a page of events carries the plants of a page of plants,
and two servers of a store differ only in size. The feed's positions follow each other from its
first, which each server is asked once it serves (the memory store takes it from the clock): a
deep page starts after a position drawn at random, from a seeded generator, among those that
leave a full page behind it, as a deep page of plants starts after an id (`bench.pages`). Ten
pages of each case are checked full over loopback before any is measured.
"""

import random
import tempfile
from collections.abc import Callable
from dataclasses import dataclass

import orjson

from bench import pages
from bench.environs import READER, InvalidRun
from bench.load import Reads
from bench.loopback import Figures, Load, Served, Setup, compare
from bench.postgres import create_database
from bench.server import Listener
from bench.stock import Stock, fill_postgres, fill_postgres_feed, fill_sqlite, fill_sqlite_feed
from plantstore.stores.memory import FEED_LIMIT
from plantstore.testing.gunicorn_server import send
from plantstore.testing.postgres_server import PostgresServer

LIMIT = pages.LIMIT
#: The most a page of events may cost, as a multiple of a page of plants on the same server.
PLANTS_TARGET = 1.0
#: The most a page from the big feed may cost, as a multiple of one from the small feed: less
#: than pages' 1.5x, for a page of events is a range of consecutive positions with no tag to skip,
#: and only the index's depth grows with the feed.
GROWTH_TARGET = 1.2
#: The pages of plants those of events are compared with, case by case: every plant's.
PLANT_CASES = pages.CASES[:2]
#: What every server is warmed up with: the first page of each kind.
FIRST_PAGES = Reads((f"/plants?limit={LIMIT}", f"/events?limit={LIMIT}"))
#: The memory store served with a stock and its feed, loaded before the fork (`--preload`) so
#: that filling it is not cut short by the worker timeout.
PRELOADED = ("--preload", "bench.preloaded:app")
#: Seconds to wait for a server's first answer: as long as a warm-up waits.
READY_SECONDS = 600
#: Asks a server for a path: its status and body.
Ask = Callable[[str], tuple[int, bytes]]


@dataclass(frozen=True)
class Feed:
    """`events` events at consecutive positions from `first`."""

    first: int
    events: int

    @property
    def positions(self) -> range:
        return range(self.first, self.first + self.events)


@dataclass(frozen=True)
class EventCase:
    """One kind of page of events: the first one, or deep ones."""

    name: str
    deep: bool

    def queries(self, feed: Feed, count: int, rng: random.Random) -> list[str]:
        query = f"limit={LIMIT}"
        if not self.deep:
            return [query] * count
        afters = feed.positions[:-LIMIT]
        return [f"{query}&after={rng.choice(afters)}" for _ in range(count)]


#: Named as the cases of `PLANT_CASES` each is compared with.
EVENT_CASES = tuple(EventCase(case.name, case.deep) for case in PLANT_CASES)


@dataclass(frozen=True)
class ServerPages:
    """One case on one server: its store's size, and the figures of its pages of each kind."""

    size: int
    plants: Figures
    events: Figures


def check_events(status: int, body: bytes, what: str) -> None:
    """Raise `InvalidRun` unless the answer is a full page of events: a shorter one costs less."""
    events = len(orjson.loads(body)["events"]) if status == 200 else 0
    if status != 200 or events != LIMIT:
        raise InvalidRun(f"{what} answered {status} with {events} events, not 200 with {LIMIT}")


def first_position(ask: Ask) -> int:
    """The position of the feed's first event, as a client finds it: the first page's first."""
    status, body = ask("/events?limit=1")
    events = orjson.loads(body)["events"] if status == 200 else []
    if not events:
        raise InvalidRun(f"GET /events?limit=1 answered {status} with no event")
    return int(events[0]["id"])


def plan_paths(
    ask: Ask, plants: int, events: int, seed: int
) -> dict[tuple[str, str], tuple[str, ...]]:
    """By kind (`plants`, `events`) and case, the paths of a server whose store holds
    `Stock(plants)` and the last `events` events of their creation, `pages.PATHS` of each; ten
    of each, spread over them, are asked and must be full pages.
    """
    rng = random.Random(seed)
    feed = Feed(first_position(ask), events)
    paths = {}
    for plant_case, event_case in zip(PLANT_CASES, EVENT_CASES, strict=True):
        queries = plant_case.queries(Stock(plants), pages.PATHS, rng)
        paths["plants", plant_case.name] = tuple(f"/plants?{query}" for query in queries)
        queries = event_case.queries(feed, pages.PATHS, rng)
        paths["events", event_case.name] = tuple(f"/events?{query}" for query in queries)
    sizes = {"plants": plants, "events": events}
    for (kind, name), chosen in paths.items():
        for path in chosen[:: max(1, len(chosen) // 10)]:
            status, body = ask(path)
            what = f"{name}, {sizes[kind]:,} {kind}, {path}"
            if kind == "plants":
                pages.check_full(status, body, what)
            else:
                check_events(status, body, what)
    return paths


class FeedServer:
    """A server (`served`) of `Stock(plants)` and `events` events of their creation, started by
    `compare` as a `Served` is. Once it serves, it is asked where its feed starts, and each
    case's paths are drawn and checked (`plan_paths`) for its loads' `workload`.
    """

    def __init__(self, served: Served, plants: int, events: int, seed: int) -> None:
        self.warm_up = served.warm_up
        self._served = served
        self._plants = plants
        self._events = events
        self._seed = seed
        self._paths: dict[tuple[str, str], tuple[str, ...]] = {}

    def start(self, cpu: int | None) -> Listener:
        listener = self._served.start(cpu)

        def ask(path: str) -> tuple[int, bytes]:
            status, _, body = send(listener.connect(READY_SECONDS), "GET", path, headers=READER)
            return status, body

        try:
            self._paths = plan_paths(ask, self._plants, self._events, self._seed)
        except OSError as ex:
            raise RuntimeError(f"the server did not serve: {ex}\n{listener.stop()[1]}") from None
        except BaseException:
            listener.stop()
            raise
        return listener

    def workload(self, kind: str, case: str) -> Callable[[int], Reads]:
        """The reads of every round of one kind and case: its paths, drawn once it served."""
        return lambda _round: Reads(self._paths[kind, case])


def fill(tmp: str, size: int, postgres: PostgresServer | None) -> dict[str, Served]:
    """Each store, holding `Stock(size)` and its feed, as the server to start."""
    path = f"{tmp}/feed-{size}.db"
    fill_sqlite(path, Stock(size))
    fill_sqlite_feed(path, Stock(size))
    served = {
        "memory": Served({"BENCH_STOCK": str(size)}, PRELOADED, FIRST_PAGES),
        "sqlite": Served({"PLANTSTORE_STORE": f"sqlite:///{path}"}, warm_up=FIRST_PAGES),
    }
    if postgres is not None:
        url = create_database(postgres, f"feed_{size}")
        fill_postgres(url, Stock(size))
        fill_postgres_feed(url, Stock(size))
        served["postgresql"] = Served({"PLANTSTORE_STORE": url}, warm_up=FIRST_PAGES)
    return served


def over_loopback(
    setup: Setup,
    small: int,
    big: int,
    postgres: PostgresServer | None,
    rounds: int,
    seconds: int,
    connections: int,
    seed: int = 0,
) -> dict[tuple[str, str], tuple[ServerPages, ServerPages]]:
    """For each store and case, the figures of the server of `small` plants and events, then
    those of the server of `big`.

    Every server is `gunicorn -c gunicorn.conf.py` (the memory store's `bench.preloaded:app`),
    and each load one kind and case on one server; they take turns, as `compare` runs them.
    The memory store keeps `FEED_LIMIT` events at most: the last ones, of a bigger stock.
    """
    with tempfile.TemporaryDirectory() as tmp:
        servers, loads = {}, {}
        for size in (small, big):
            for kind, served in fill(tmp, size, postgres).items():
                events = min(size, FEED_LIMIT) if kind == "memory" else size
                name = f"{kind} {size:,}"
                servers[name] = FeedServer(served, size, events, seed)
                for what in ("plants", "events"):
                    for case in PLANT_CASES:
                        workload = servers[name].workload(what, case.name)
                        loads[kind, case.name, size, what] = Load(name, workload)
        figures = compare(setup, servers, loads, rounds, seconds, connections)
    stores = dict.fromkeys(kind for kind, *_ in loads)
    return {
        (kind, case.name): tuple(
            ServerPages(
                size,
                figures[kind, case.name, size, "plants"],
                figures[kind, case.name, size, "events"],
            )
            for size in (small, big)
        )
        for kind in stores
        for case in PLANT_CASES
    }
