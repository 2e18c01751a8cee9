"""Page cost against the store's size: `GET /plants?limit=100` from a small store and from one of
1,000,000 plants; in process on the memory store, over loopback on SQLite and PostgreSQL.

Every store holds plants 0 to N - 1 with tags `t0` to `t99` in turn (`bench.stock`), so only
their size differs. The small store of every-plant pages holds 1,000 plants; that of a tag's
pages holds 20,000, the fewest in which the tag (1 plant in 100) fills two pages: a page of it
from 1,000 plants would hold 10, and cost less for that alone. A deep page starts after an id
drawn at random (from a seeded generator) among those that leave a full page behind them, so
pages come from all over the store, not only its start; every page measured is full.
"""

import gc
import random
import statistics
import tempfile
from collections.abc import Callable
from dataclasses import dataclass

import orjson

from bench.environs import CONFIG, READER, TAGS, InvalidRun, Replayer
from bench.inprocess import timed
from bench.load import Reads
from bench.loopback import Figures, Load, Served, Setup, compare
from bench.postgres import create_database
from bench.stock import Stock, fill_memory, fill_postgres, fill_sqlite
from plantstore.app import create_app
from plantstore.stores import open_store
from plantstore.stores.memory import MemoryStore
from plantstore.testing.postgres_server import PostgresServer

LIMIT = 100
TAG = "t42"
#: The fewest plants in which one tag holds two full pages.
TAG_PLANTS = 2 * LIMIT * TAGS
#: Paths each load generator cycles through.
PATHS = 10_000


@dataclass(frozen=True)
class PageCase:
    """One kind of page: of every plant or of `tag`'s only; the first one, or deep ones."""

    name: str
    tag: str | None
    deep: bool

    def sizes(self, small: int, big: int) -> tuple[int, int]:
        """The plants of the two stores compared: a tag's pages need `TAG_PLANTS` at least."""
        return (small if self.tag is None else max(small, TAG_PLANTS)), big

    def queries(self, stock: Stock, count: int, rng: random.Random) -> list[str]:
        query = f"limit={LIMIT}" if self.tag is None else f"limit={LIMIT}&tag={self.tag}"
        if not self.deep:
            return [query] * count
        afters = stock.ids(self.tag)[:-LIMIT]
        return [f"{query}&after={rng.choice(afters)}" for _ in range(count)]


CASES = (
    PageCase("first page", None, deep=False),
    PageCase("deep pages", None, deep=True),
    PageCase("tag first page", TAG, deep=False),
    PageCase("tag deep pages", TAG, deep=True),
)


def check_full(status: int, body: bytes, what: str) -> None:
    """Raise `InvalidRun` unless the answer is a full page: a page with fewer plants costs less,
    and measuring it would flatter the store.
    """
    plants = len(orjson.loads(body)) if status == 200 else 0
    if status != 200 or plants != LIMIT:
        raise InvalidRun(f"{what} answered {status} with {plants} plants, not 200 with {LIMIT}")


def check_pages(app: Callable, stock: Stock, queries: dict[str, list[str]]) -> None:
    """Ask the app ten pages of each case, spread over its queries; each must be a full page."""
    reader = Replayer(READER, "GET")
    for name, chosen in queries.items():
        for query in chosen[:: max(1, len(chosen) // 10)]:
            status, body = _answer(app, reader.environ(query=query))
            check_full(status, body, f"{name}, {stock.count:,} plants, ?{query}")


def _answer(app: Callable, environ: dict) -> tuple[int, bytes]:
    statuses = []
    body = b"".join(app(environ, lambda status, headers, exc_info=None: statuses.append(status)))
    return int(statuses[-1][:3]), body


def plan(small: int, big: int, count: int, seed: int) -> dict[int, dict[str, list[str]]]:
    """For each store size, `count` queries of each case that compares a store of that size."""
    rng = random.Random(seed)
    queries: dict[int, dict[str, list[str]]] = {}
    for case in CASES:
        for plants in case.sizes(small, big):
            queries.setdefault(plants, {})[case.name] = case.queries(Stock(plants), count, rng)
    return queries


def in_process(
    small: int, big: int, rounds: int, batch: int, seed: int = 0
) -> dict[str, list[tuple[int, float]]]:
    """Give, for each case, the plants of the two stores compared and their median µs a page.

    Stores and cases take turns within each round, in reversed order every other round.
    """
    queries = plan(small, big, rounds * batch, seed)
    apps = {}
    for plants, mine in queries.items():
        store = MemoryStore()
        fill_memory(store, Stock(plants))
        apps[plants] = create_app(CONFIG, store)
        check_pages(apps[plants], Stock(plants), mine)
    # What filling left to the collector is not the pages' cost: collect it before any is timed.
    gc.collect()
    reader = Replayer(READER, "GET")
    runs = [(plants, case.name) for case in CASES for plants in case.sizes(small, big)]
    timings: dict[tuple[int, str], list[float]] = {run: [] for run in runs}
    for round_number in range(rounds):
        for plants, name in runs if round_number % 2 == 0 else runs[::-1]:
            chosen = queries[plants][name][round_number * batch : (round_number + 1) * batch]
            environs = [reader.environ(query=query) for query in chosen]
            timings[plants, name].append(timed(apps[plants], environs, 200))
    return {
        case.name: [
            (plants, statistics.median(timings[plants, case.name]))
            for plants in case.sizes(small, big)
        ]
        for case in CASES
    }


def over_loopback(
    setup: Setup,
    small: int,
    big: int,
    postgres: PostgresServer | None,
    rounds: int,
    seconds: int,
    connections: int,
    seed: int = 0,
) -> dict[tuple[str, str], list[tuple[int, Figures]]]:
    """Give, for each store and case, the plants of the two stores compared and their figures.

    Every server is `gunicorn -c gunicorn.conf.py` on a database filled ahead (SQLite, and
    PostgreSQL when there is a cluster); the pages are checked full through the app in process
    before gunicorn serves them.
    """
    queries = plan(small, big, PATHS, seed)
    with tempfile.TemporaryDirectory() as tmp:
        urls = {}
        for plants in queries:
            path = f"{tmp}/plants-{plants}.db"
            fill_sqlite(path, Stock(plants))
            urls["sqlite", plants] = f"sqlite:///{path}"
            if postgres is not None:
                urls["postgresql", plants] = create_database(postgres, f"plants_{plants}")
                fill_postgres(urls["postgresql", plants], Stock(plants))
        servers, loads = {}, {}
        for (kind, plants), url in urls.items():
            store = open_store(url)
            try:
                check_pages(create_app(CONFIG, store), Stock(plants), queries[plants])
            finally:
                store.close()
            server = f"{kind} {plants:,}"
            first_pages = tuple(f"/plants?{chosen[0]}" for chosen in queries[plants].values())
            servers[server] = Served({"PLANTSTORE_STORE": url}, warm_up=Reads(first_pages))
            for name, chosen in queries[plants].items():
                reads = Reads(tuple(f"/plants?{query}" for query in chosen))
                loads[kind, name, plants] = Load(server, lambda _round, reads=reads: reads)
        figures = compare(setup, servers, loads, rounds, seconds, connections)
    return {
        (kind, case.name): [
            (plants, figures[kind, case.name, plants]) for plants in case.sizes(small, big)
        ]
        for kind in dict.fromkeys(kind for kind, _ in urls)
        for case in CASES
    }
