"""The benchmark still runs and still checks every answer (so it cannot rot).

The benchmark itself (`python -m bench`) is not part of the suite: these run a few requests of
every case, on small stores. The parts over loopback run for a second each under `-m slow`.
"""

import os
import random
import subprocess
import sys
from contextlib import ExitStack, closing
from itertools import count, islice
from types import SimpleNamespace

import falcon.testing
import fastapi.testclient
import pytest
from prometheus_client import CollectorRegistry, Counter, generate_latest

from bench import counts, durable, feed, inprocess, loopback, pages, peer, postgres, webhooks
from bench.environs import (
    AUTHORIZED,
    CONFIG,
    READER,
    TOKEN,
    InvalidRun,
    Replayer,
    create,
    plant_body,
    replay,
    tag_of,
)
from bench.load import Creates, Deletes, LoadResult, Request, python_load
from bench.loopback import choose_setup, pinned
from bench.server import ROOT, WARM_UP_REQUESTS, Peer, Server, server_environ
from bench.stock import (
    FIRST_TRANSACTION,
    Stock,
    document,
    fill_memory,
    fill_postgres,
    fill_postgres_feed,
    fill_sqlite,
    fill_sqlite_feed,
)
from plantstore.api.conditions import etag_of
from plantstore.app import create_app
from plantstore.core.stores import EventPage
from plantstore.serving.settings import read_settings
from plantstore.stores import open_store
from plantstore.stores.memory import MemoryStore
from plantstore.stores.postgres_batch import POSITIONS_PER_TRANSACTION
from plantstore.testing.feed import events_of
from plantstore.testing.postgres_server import PostgresServer
from plantstore.testing.webhook_receiver import Delivery
from plantstore.tokens.file import read_tokens_file

#: The floor, and every case the bench holds to a target.
CASES = ["floor", *inprocess.CASES]
#: Store sizes of the page cases: each compares two stores, of 1,000 or 20,000 plants and 30,000.
SMALL, BIG = 1_000, 30_000


def case_named(name: str) -> inprocess.Case:
    return next(case for case in inprocess.cases() if case.name == name)


def test_the_in_process_part_measures_every_case_and_the_etags_work():
    medians = inprocess.measure(rounds=2, batch=5)
    assert set(medians) == {*CASES, inprocess.ETAG}
    assert all(microseconds > 0 for microseconds in medians.values())


def test_the_etags_work_is_timed_on_the_plants_the_get_case_reads():
    """The digest is taken of the very bytes each read answers: its ETag is their digest."""
    client = falcon.testing.TestClient(case_named("get").app)
    for i in (0, 1, inprocess.READABLE - 1):
        plant_id = inprocess.readable(i)
        answer = client.simulate_get(f"/plants/{plant_id}", headers=READER)
        assert answer.content == document(plant_id, tag_of(plant_id))
        assert answer.headers["ETag"] == f'"{etag_of(answer.content)}"'


@pytest.mark.parametrize("name", CASES)
def test_each_case_gets_the_status_it_is_measured_for(name):
    case = case_named(name)
    replay(case.app, case.environs(count(), 3), case.expected)


def test_an_answer_with_another_status_makes_the_run_invalid():
    unauthorized = case_named("401")
    with pytest.raises(InvalidRun, match="POST /plants answered 401, not 200"):
        replay(unauthorized.app, unauthorized.environs(count(), 3), 200)


def test_every_success_creates_a_plant_of_its_own():
    success = case_named("success")
    replay(success.app, success.environs(count(), 3), 200)
    other_content = Replayer(AUTHORIZED).environ(b'{"id": 2, "name": "other"}')
    replay(success.app, [other_content], 409)


def test_the_webhooks_case_keeps_every_event_for_a_subscriber_that_never_answers():
    subscribed = case_named("webhooks")

    def figures() -> dict[str, float]:
        client = falcon.testing.TestClient(subscribed.app)
        lines = client.simulate_get("/metrics", headers=READER).text.splitlines()
        pairs = (line.split() for line in lines if line.startswith("plantstore_webhook"))
        return {name: float(value) for name, value in pairs}

    # The counters are the process's, which other tests may have added to.
    sent = figures()["plantstore_webhook_events_sent_total"]
    replay(subscribed.app, subscribed.environs(count(), 3), 200)
    assert figures()["plantstore_webhook_oldest_pending_seconds"] > 0
    assert figures()["plantstore_webhook_events_sent_total"] == sent


def test_a_delay_runs_from_an_events_commit_to_its_first_receipt():
    def delivery(webhook_id: str, plant_id: int, received: float) -> Delivery:
        event = {"type": "plant.created", "timestamp": "2025-01-01T00:00:00.250Z"}
        return Delivery(webhook_id, {**event, "data": {"id": plant_id}}, received, "/hooks", None)

    committed = 1735689600.25
    receiver = SimpleNamespace(
        deliveries=[
            delivery("msg_warm_up", -1, committed + 9),
            delivery("msg_b", 11, committed + 0.5),
            delivery("msg_a", 10, committed + 0.125),
            delivery("msg_b", 11, committed + 7),
        ]
    )
    assert webhooks.commit_to_receipt(receiver, first_id=0) == [0.125, 0.5]


def test_the_pages_part_measures_every_case_on_two_stores():
    medians = pages.in_process(SMALL, BIG, rounds=2, batch=3)
    assert list(medians) == [case.name for case in pages.CASES]
    assert [[plants for plants, _ in both] for both in medians.values()] == [
        [SMALL, BIG],
        [SMALL, BIG],
        [pages.TAG_PLANTS, BIG],
        [pages.TAG_PLANTS, BIG],
    ]
    assert all(microseconds > 0 for both in medians.values() for _, microseconds in both)


def test_a_page_short_of_the_limit_makes_the_run_invalid():
    app = create_app(CONFIG, MemoryStore())
    create(app, 0, pages.LIMIT - 1)
    with pytest.raises(InvalidRun, match="99 plants, not 200 with 100"):
        pages.check_pages(app, Stock(pages.LIMIT - 1), {"first page": ["limit=100"]})


def test_deep_pages_start_all_over_the_store():
    afters = [
        int(query.rpartition("after=")[2])
        for query in pages.CASES[1].queries(Stock(100_000), 1_000, random.Random(0))
    ]
    assert min(afters) < 10_000 and max(afters) > 90_000
    assert max(afters) < 100_000 - pages.LIMIT


def test_a_stocked_plant_is_what_the_service_keeps_for_it():
    store = MemoryStore()
    create(create_app(CONFIG, store), 0, 200)
    assert [(i, store.get(i)) for i in range(200)] == list(Stock(200).documents())
    assert {tag_of(i) for i in range(200)} == {f"t{i}" for i in range(100)}


def test_a_tag_fills_two_pages_of_the_small_store_of_its_pages():
    assert len(Stock(pages.TAG_PLANTS).ids(pages.TAG)) == 2 * pages.LIMIT


def assert_filled_like_the_service(url: str, stock: Stock) -> None:
    """The service answers every page case, full, and the plants as it would have made them."""
    store = open_store(url)
    try:
        app = create_app(CONFIG, store)
        rng = random.Random(0)
        pages.check_pages(app, stock, {c.name: c.queries(stock, 20, rng) for c in pages.CASES})
        ends = (0, stock.count - 1)
        assert [(i, store.get(i)) for i in ends] == [(i, document(i, tag_of(i))) for i in ends]
    finally:
        store.close()


def test_sqlite_is_filled_as_the_service_would_fill_it(tmp_path):
    path = tmp_path / "plants.db"
    fill_sqlite(str(path), Stock(pages.TAG_PLANTS))
    assert_filled_like_the_service(f"sqlite:///{path}", Stock(pages.TAG_PLANTS))


def test_postgresql_is_filled_as_the_service_would_fill_it(postgres_url):
    fill_postgres(postgres_url, Stock(pages.TAG_PLANTS))
    assert_filled_like_the_service(postgres_url, Stock(pages.TAG_PLANTS))


def asking(app) -> feed.Ask:
    """Ask the app in process, as the bench asks a server over loopback."""
    client = falcon.testing.TestClient(app)

    def ask(path: str) -> tuple[int, bytes]:
        answer = client.simulate_get(path, headers=READER)
        return answer.status_code, answer.content

    return ask


def test_the_feed_parts_pages_of_every_case_are_full_on_a_stocked_memory_store():
    """Filled as `bench.preloaded:app` fills it with `BENCH_STOCK`: `plan_paths` asks ten pages
    of each case, and finds each full."""
    store = MemoryStore()
    fill_memory(store, Stock(SMALL))
    paths = feed.plan_paths(asking(create_app(CONFIG, store)), SMALL, SMALL, seed=0)
    kinds = [(kind, case.name) for case in feed.PLANT_CASES for kind in ("plants", "events")]
    assert list(paths) == kinds
    assert all(len(chosen) == pages.PATHS for chosen in paths.values())


def test_deep_pages_past_the_feeds_end_make_the_run_invalid():
    store = MemoryStore()
    fill_memory(store, Stock(SMALL))
    with pytest.raises(InvalidRun, match=r"deep pages, 2,000 events, .* not 200 with 100"):
        feed.plan_paths(asking(create_app(CONFIG, store)), SMALL, 2 * SMALL, seed=0)


def test_deep_pages_of_events_start_all_over_the_feed():
    deep = feed.EVENT_CASES[1]
    queries = deep.queries(feed.Feed(1, 100_000), 1_000, random.Random(0))
    afters = [int(query.rpartition("after=")[2]) for query in queries]
    assert min(afters) < 10_000 and max(afters) > 90_000
    assert min(afters) >= 1 and max(afters) <= 100_000 - feed.LIMIT


def changes(page: EventPage) -> list[tuple]:
    """What each event says changed: its kind, its plant's id and the plant."""
    return [(event.kind, event.plant_id, event.plant) for event in events_of(page)]


def assert_feed_filled_like_the_service(url: str, first: int) -> None:
    """The store's events are those the service makes creating the stock's plants one by one,
    at consecutive positions from `first`, each readable; the feed part's pages are full."""
    made = MemoryStore()
    create(create_app(CONFIG, made), 0, SMALL)
    store = open_store(url)
    try:
        filled = store.events(None, SMALL + 1)
        assert changes(filled) == changes(made.events(None, SMALL + 1))
        positions = [event.position for event in events_of(filled)]
        assert positions == list(range(first, first + SMALL))
        feed.plan_paths(asking(create_app(CONFIG, store)), SMALL, SMALL, seed=0)
    finally:
        store.close()


def test_a_sqlite_feed_is_filled_as_the_service_would_fill_it(tmp_path):
    """At positions 1 to N, and the next the service gives is N + 1."""
    path = tmp_path / "plants.db"
    fill_sqlite(str(path), Stock(SMALL))
    fill_sqlite_feed(str(path), Stock(SMALL))
    assert_feed_filled_like_the_service(f"sqlite:///{path}", 1)
    store = open_store(f"sqlite:///{path}")
    try:
        assert store.head() == SMALL
    finally:
        store.close()


def test_a_postgresql_feed_is_filled_as_the_service_would_fill_it(postgres_url):
    fill_postgres(postgres_url, Stock(SMALL))
    fill_postgres_feed(postgres_url, Stock(SMALL))
    assert_feed_filled_like_the_service(postgres_url, FIRST_TRANSACTION * POSITIONS_PER_TRANSACTION)


@pytest.fixture
def peer_client():
    return fastapi.testclient.TestClient(peer.create_peer_app())


def test_the_peer_creates_as_the_service_does(peer_client):
    """The bench's creates answer 200 with the plant, an identical repeat 200 again, other
    content under the same id 409; fields the contract does not name are ignored."""
    created = peer_client.post("/plants", content=plant_body(7), headers=AUTHORIZED)
    assert (created.status_code, created.json()) == (200, {"name": "plant-7", "tag": "tree"})
    repeated = peer_client.post("/plants", content=plant_body(7), headers=AUTHORIZED)
    assert (repeated.status_code, repeated.json()) == (200, created.json())
    other = peer_client.post("/plants", json={"id": 7, "name": "other"}, headers=AUTHORIZED)
    assert other.status_code == 409
    assert other.json() == {"error": 409, "message": "Plant 7 already exists with other content."}
    untagged = peer_client.post("/plants", json={"id": 8, "name": "a", "x": 1}, headers=AUTHORIZED)
    assert (untagged.status_code, untagged.json()) == (200, {"name": "a"})


@pytest.mark.parametrize(
    "body",
    [
        {"id": "7", "name": "a"},
        {"id": 7.0, "name": "a"},
        {"id": True, "name": "a"},
        {"id": 2**63, "name": "a"},
        {"id": 7},
        {"id": 7, "name": 5},
    ],
)
def test_the_peer_refuses_what_the_contract_refuses_with_400_and_the_error_body(peer_client, body):
    refused = peer_client.post("/plants", json=body, headers=AUTHORIZED)
    assert refused.status_code == 400
    assert refused.json()["error"] == 400
    assert peer_client.post("/plants", json={"id": 7, "name": "a"}, headers=AUTHORIZED).is_success


@pytest.mark.parametrize(
    "authorization", [None, "Bearer wrong", "Basic YmVuY2gtdG9rZW4=", "bench-token"]
)
def test_the_peer_answers_401_and_the_error_body_without_the_token(peer_client, authorization):
    headers = {} if authorization is None else {"Authorization": authorization}
    refused = peer_client.post("/plants", content=plant_body(7), headers=headers)
    assert refused.status_code == 401
    assert refused.json()["error"] == 401
    assert refused.headers["WWW-Authenticate"] == "Bearer"


@pytest.mark.slow
def test_the_peer_serves_under_uvicorn_on_the_servers_cpu():
    cpu = min(os.sched_getaffinity(0))
    with Peer(cpu) as served:
        served.warm_up(Creates(0), requests=3)
        pid = served.pid
        assert os.sched_getaffinity(pid) == {cpu}


def scrape_of(commits: dict[str, int], changes: dict[str, int]) -> str:
    """What /metrics shows with these commits and changes counted, by the label `store`."""
    registry = CollectorRegistry()
    for name, by_label in (("commits", commits), ("changes", changes)):
        counter = Counter(f"plantstore_store_{name}", name, ["store"], registry=registry)
        for label, value in by_label.items():
            counter.labels(label).inc(value)
    return generate_latest(registry).decode()


def counted(commits: int, changes: int) -> dict[str, float]:
    return durable.store_counters(scrape_of({"sqlite": commits}, {"sqlite": changes}))


def test_commits_and_changes_are_summed_over_their_labels():
    metrics = scrape_of({"a": 2, "b": 3}, {"a": 7, "b": 13})
    assert durable.store_counters(metrics) == {durable.COMMITS: 5, durable.CHANGES: 20}


def test_commits_a_change_are_those_of_every_run_together():
    commits = durable.Commits()
    commits.add(counted(1, 1), counted(3, 9))
    commits.add(counted(3, 9), counted(4, 11))
    assert commits.per_change == 3 / 10


def test_commits_and_changes_not_counted_before_a_run_count_from_nothing():
    commits = durable.Commits()
    commits.add(durable.store_counters(scrape_of({}, {})), counted(1, 4))
    assert commits.per_change == 1 / 4


@pytest.mark.parametrize(
    "before, after", [("", ""), (scrape_of({"a": 1}, {}), scrape_of({"a": 2}, {}))]
)
def test_a_service_that_does_not_count_commits_and_changes_has_no_figure(before, after):
    commits = durable.Commits()
    commits.add(counted(1, 1), counted(2, 2))
    commits.add(durable.store_counters(before), durable.store_counters(after))
    assert commits.per_change is None


def test_cpu_time_is_read_after_the_command_whatever_it_holds():
    """utime 13 and stime 17 ticks; its reaped children's, 19 and 23."""
    stat = "42 (a) b) (c) S 1 42 42 0 -1 4194560 9 0 0 0 13 17 19 23 20 0 1 0 9 1 1 0\n"
    assert counts.cpu_ticks(stat) == 30
    assert counts.cpu_ticks(stat, reaped=True) == 72


def burn_cpu(seconds: float) -> None:
    """Run a child that spends `seconds` of CPU time, and wait for it (reaping it)."""
    burner = f"import time\nwhile time.process_time() < {seconds}: pass"
    subprocess.run([sys.executable, "-c", burner], check=True)


def test_a_family_counts_the_cpu_time_of_the_children_it_reaped():
    before = counts.family_ticks(os.getpid(), itself=False)
    burn_cpu(0.3)
    assert counts.family_ticks(os.getpid(), itself=False) - before >= 0.25 * counts.TICKS_A_SECOND


SS = """\
0      0      127.0.0.1:40001 127.0.0.1:5432 users:(("python",pid=11,fd=7))
\t bbr wscale:10,10 rto:204 bytes_sent:364 segs_out:16 segs_in:15 data_segs_out:13 data_segs_in:13
0      0      127.0.0.1:40002 127.0.0.1:5432 users:(("python",pid=22,fd=8))
\t bbr wscale:10,10 rto:204 bytes_sent:9 segs_out:4 segs_in:4 data_segs_out:2 data_segs_in:2
0      0      127.0.0.1:40003 127.0.0.1:5432 users:(("python",pid=11,fd=9),("python",pid=33,fd=9))
\t bbr wscale:10,10 rto:204 segs_out:1 segs_in:1
"""


def test_the_segments_sent_are_those_of_the_connections_the_service_holds():
    """A connection that sent no data has no data_segs_out in ss's output: it sent none."""
    assert counts.segments_sent(SS, {11, 12}) == {"127.0.0.1:40001": 13, "127.0.0.1:40003": 0}
    assert counts.segments_sent(SS, {22}) == {"127.0.0.1:40002": 2}
    assert counts.segments_sent("", {11}) == {}


def test_a_connection_opened_in_a_run_counts_every_segment_and_one_closed_none():
    tally = counts.Tally()
    before = counts.Reading(100, 50, 7, {"kept": 10, "closed": 4})
    after = counts.Reading(160, 80, 12, {"kept": 25, "opened": 3})
    tally.add(10, before, after)
    assert (tally.service_us(), tally.postgres_us()) == (
        6 * 1e6 / counts.TICKS_A_SECOND,
        3 * 1e6 / counts.TICKS_A_SECOND,
    )
    assert (tally.statements_each(), tally.round_trips_each(), tally.closed) == (0.5, 1.8, 1)


class ScriptedPostgres:
    """A database whose transactions are reported as told, and whose other counts stay put."""

    def __init__(self, transactions: list[int]) -> None:
        self.reported = iter(transactions)

    def transactions(self) -> int:
        return next(self.reported)

    def cpu_ticks(self) -> int:
        return 0

    def statements(self) -> int:
        return 0

    def segments(self, pids) -> dict[str, int]:
        return {}


def test_a_runs_transactions_are_those_reported_once_it_settled(monkeypatch):
    """Read right after the run, the last of them would be missing: they are read later."""
    monkeypatch.setattr(counts, "REPORTED_WITHIN", 0)
    server = SimpleNamespace(pid=os.getpid(), worker_pids=list)
    counter = counts.Counter(server, ScriptedPostgres([100, 190]))
    tally = counts.Tally()
    run = LoadResult(requests=300, seconds=1, p50_us=1, p99_us=1, unexpected=0, socket_errors=0)
    counter.run(lambda: run, tally)
    assert tally.transactions == 0
    counter.settle()
    assert tally.transactions_each() == 90 / 300
    counter.settle()
    assert tally.transactions == 90


def answer(client: falcon.testing.TestClient, request: Request) -> falcon.testing.Result:
    method, path, body, headers = request
    return client.simulate_request(method, path, body=body, headers=headers)


@pytest.fixture
def warmed_up():
    """The app on a memory store, warmed up as every loopback server is."""
    client = falcon.testing.TestClient(create_app(CONFIG, MemoryStore()))
    for request in islice(loopback.CREATES_BEFORE.requests(), WARM_UP_REQUESTS):
        assert answer(client, request).status_code == 200
    return client


def test_the_reads_read_the_plants_of_the_warm_up_and_a_revalidation_names_their_etag(
    warmed_up,
):
    plants = len(loopback.WARMED_UP)
    reads = [answer(warmed_up, read) for read in islice(loopback.READS.requests(), plants)]
    assert [read.status_code for read in reads] == [200] * plants
    revalidations = islice(loopback.REVALIDATIONS.requests(), plants)
    for read, request in zip(reads, revalidations, strict=True):
        assert request[3]["If-None-Match"] == read.headers["ETag"]
        assert answer(warmed_up, request).status_code == 304


def test_the_file_tokens_server_takes_the_benchs_token_from_the_file_alone(tmp_path):
    """A start reads the file the bench writes; its one entry is the token's digest, with no
    more scopes than creates need; and the environment lists no token besides."""
    environ = server_environ(**loopback.tokens_file(str(tmp_path)))
    assert "PLANTSTORE_TOKENS" not in environ
    config = read_settings(environ)
    assert config.tokens == frozenset()
    (entry,) = read_tokens_file(config.tokens_file)
    assert (entry.plain, entry.name, entry.scopes) == (False, "bench", {"write"})
    assert TOKEN not in (tmp_path / "tokens").read_text()


def test_the_token_from_the_file_lets_the_loopback_creates_create(tmp_path):
    config = read_settings(server_environ(**loopback.tokens_file(str(tmp_path))))
    client = falcon.testing.TestClient(create_app(config, MemoryStore()))
    for request in islice(loopback.creates(0).requests(), 3):
        assert answer(client, request).status_code == 200


def test_every_replace_changes_its_plant_round_after_round(warmed_up):
    """Each PUT answers 200 with a plant other than the one it replaced: none stores what was
    there already (a PUT that changes nothing costs less), nor creates one (201)."""
    tags = {
        path: warmed_up.simulate_get(path, headers=READER).headers["ETag"]
        for path in loopback.READS.paths
    }
    for round_number in range(2):
        requests = loopback.replaces(round_number).requests()
        for request in islice(requests, 2 * len(loopback.WARMED_UP)):
            replaced = answer(warmed_up, request)
            assert replaced.status_code == 200
            assert replaced.headers["ETag"] != tags[request[1]]
            tags[request[1]] = replaced.headers["ETag"]


@pytest.mark.slow
@pytest.mark.parametrize("generator", ["wrk", "python"])
def test_revalidations_answer_304_until_replaces_change_every_plant(generator):
    """Both generators send each plant's ETag and count the 304 as expected; they replace
    every plant of the warm-up, answered 200; a revalidation of a changed plant, answered 200,
    makes the run invalid."""
    setup = choose_setup(generator)
    with Server(None, server_environ()) as server, pinned(setup.load_cpu):
        server.warm_up(loopback.CREATES_BEFORE)
        before = setup.load(server.port, loopback.REVALIDATIONS, seconds=1, connections=4)
        replaced = setup.load(server.port, loopback.replaces(0), seconds=1, connections=4)
        after = setup.load(server.port, loopback.REVALIDATIONS, seconds=1, connections=4)
    assert before.valid and replaced.valid
    assert replaced.requests > len(loopback.WARMED_UP)
    assert after.unexpected == after.requests > 0
    assert not after.valid


@pytest.mark.slow
@pytest.mark.parametrize("generator", ["wrk", "python"])
def test_each_plant_is_deleted_once_and_one_sent_again_makes_the_run_invalid(generator):
    setup = choose_setup(generator)
    with Server(None, server_environ()) as server, pinned(setup.load_cpu):
        server.warm_up(Creates(0), requests=100)
        run = setup.load(server.port, Deletes(tuple(range(100))), seconds=1, connections=4)
    assert run.requests - run.unexpected == 100
    assert run.unexpected > 0
    assert not run.valid


@pytest.mark.slow
def test_the_durable_parts_cluster_waits_for_the_disk_and_the_tests_does_not(
    postgres_bindir, postgres_server_url
):
    server = PostgresServer(postgres_bindir, durable=True)
    try:
        assert postgres.durability(server.url()) == {"fsync": "on", "synchronous_commit": "on"}
    finally:
        server.remove()
    assert postgres.durability(postgres_server_url)["fsync"] == "off"


@pytest.mark.slow
def test_a_counted_run_on_postgresql_counts_every_transaction_statement_and_trip():
    """Counted over a second of creates: at least the commits the service counted itself (read
    at once, PostgreSQL's count would miss the last of them), a statement and a round trip
    each, and the CPU time of both sides.
    """
    setup = choose_setup("python")
    with ExitStack() as stack:
        cluster = stack.enter_context(postgres.cluster(setup.server_cpu, durable=True))
        url = postgres.create_database(cluster, durable.DATABASE)
        database = stack.enter_context(closing(counts.Postgres(cluster, durable.DATABASE)))
        server = stack.enter_context(Server(None, server_environ(PLANTSTORE_STORE=url)))
        server.warm_up(loopback.CREATES_BEFORE, requests=10)
        counter, tally = counts.Counter(server, database), counts.Tally()
        before = durable.scrape(server)
        with pinned(setup.load_cpu):
            run = counter.run(lambda: setup.load(server.port, Creates(0), 1, 4), tally)
        after = durable.scrape(server)
        counter.settle()
    assert run.valid
    assert tally.requests == run.requests > 0
    assert tally.transactions >= after[durable.COMMITS] - before[durable.COMMITS] > 0
    assert tally.statements >= tally.transactions
    assert tally.segments >= tally.transactions
    assert tally.service_ticks > 0 and tally.postgres_ticks > 0
    assert tally.closed == 0


@pytest.mark.slow
def test_a_paced_load_sends_at_its_rate():
    with Server(None, server_environ(), "bench.floor:app") as server:
        server.warm_up(Creates(-10), requests=10)
        paced = python_load(server.port, Creates(0), seconds=1, connections=4, rate=50)
    assert paced.valid
    assert paced.requests in (50, 51)


@pytest.mark.slow
def test_every_event_of_a_paced_load_arrives_and_is_timed():
    setup = choose_setup("python")
    for store, delivery in webhooks.delivery(setup, rate=50, seconds=1, connections=4).items():
        assert delivery.valid, store
        assert len(delivery.delays) == delivery.paced.requests > 0, store
        assert 0 < delivery.delays[0] <= delivery.delays[-1] < 5, store
        assert delivery.delivered_per_second > 0, store


def run_bench(*arguments: str) -> str:
    """Run `python -m bench` with `arguments`; check that it found every answer as expected, and
    give what it printed.
    """
    done = subprocess.run(
        [sys.executable, "-m", "bench", *arguments],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "INVALID" not in done.stdout
    return done.stdout


@pytest.mark.slow
def test_the_parts_over_loopback_run_and_every_answer_is_as_expected():
    """Every server, load and check, for one second each, with the Python load generator."""
    arguments = ["--parts", "loopback", "loopback-reads", "loopback-webhooks", "delivery"]
    arguments += ["loopback-pages", "feed", "tail"]
    arguments += ["--generator", "python"]
    arguments += ["--loopback-rounds", "1", "--seconds", "1", "--plants", "30000"]
    printed = run_bench(*arguments)
    pinned, as_served = printed.split("\nas `plantstore serve` runs here: nothing pinned")
    assert "; server on CPU " in pinned and "; nothing pinned: server and " in as_served
    for placed in (pinned, as_served):
        assert f"x {loopback.PEER}'s (target ≥ 1.0x: " in placed
        assert "x its (target ≤ 1.5x: " in placed
        (file_token,) = [
            line for line in placed.splitlines() if line.startswith(f"  {loopback.TOKENS_FILE} ")
        ]
        assert "x memory's (target ≥ 0.95x: " in file_token
    assert f"x plants' (target ≤ {feed.PLANTS_TARGET}x: " in printed
    assert "30,000 events against 1,000: cost " in printed


@pytest.mark.slow
def test_the_durable_part_runs_every_case_and_every_answer_is_as_expected():
    """Every store, case and connection count for a second, with wrk when it can be had, in
    both placements."""
    printed = run_bench("--parts", "durable", "--loopback-rounds", "1", "--seconds", "1")
    pinned, as_served = printed.split("\nas `plantstore serve` runs here: nothing pinned")
    assert "; server on CPU " in pinned and "; nothing pinned: server and " in as_served
    for placed in (pinned, as_served):
        assert_durable_printout(placed)


def assert_durable_printout(printed: str) -> None:
    """Every case, connection count and store has its line, its ratio and its counts."""
    durable_stores = 1
    if postgres.unavailable() is None:
        assert "PostgreSQL with fsync = on, synchronous_commit = on" in printed
        durable_stores = 2
    for connections in durable.CONNECTIONS:
        for case in durable.CASES:
            assert f"  {case}, {connections} connections\n" in printed
    compared = [line for line in printed.splitlines() if "x memory's (target ≤ 3x: " in line]
    assert len(compared) == len(durable.CONNECTIONS) * len(durable.CASES) * durable_stores
    counted = [line for line in printed.splitlines() if "a request: service CPU " in line]
    assert len(counted) == len(durable.CONNECTIONS) * len(durable.COUNTED) * (1 + durable_stores)
    if durable_stores == 2:
        assert sum(" round trips (target ≤ 0.5: " in line for line in counted) == 1
