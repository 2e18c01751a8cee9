"""`/metrics`: what each metric counts, labels that stay bounded, and who may read them."""

import os
import re
import signal
import socket
import subprocess
import sys
import threading
from importlib.metadata import version

import falcon.testing
import pytest
from prometheus_client import CONTENT_TYPE_LATEST
from prometheus_client.parser import text_string_to_metric_families

from plantstore.app import create_app
from plantstore.config import Config, ConfigError
from plantstore.core.stores import StoreUnavailable
from plantstore.operations.health import READY_ANSWER_SECONDS, ReadinessCheck
from plantstore.operations.metrics import MetricsEndpoint, process_metrics
from plantstore.stores.memory import MemoryStore
from plantstore.testing.gunicorn_server import ROOT, GunicornServer, run_to_exit, server_environ
from tests.conftest import TOKEN
from tests.support.clock import Clock
from tests.support.concurrency import at_once
from tests.support.raw_http import parse_answers, read_until_closed
from tests.support.workers import replacements, scrape_server, sqlite_workers, wait_for

FERN = {"id": 1, "name": "fern", "tag": "green"}


def scrape(client) -> dict[tuple, float]:
    """Every sample of `/metrics`: {(name, (label, value), ...): value}."""
    result = client.simulate_get("/metrics")
    assert result.status_code == 200
    assert result.headers["content-type"] == CONTENT_TYPE_LATEST
    return {
        (sample.name, *sorted(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(result.text)
        for sample in family.samples
    }


def requests(samples, route, method, status) -> float:
    key = ("plantstore_http_requests_total", ("method", method), ("route", route))
    return samples.get((*key, ("status", status)), 0)


class Growth:
    """What a client's scrapes gained since this was made.

    The metrics are the process's, and every test's requests add to them: a test looks at
    what its own added.
    """

    def __init__(self, client) -> None:
        self._client = client
        self._before = scrape(client)

    def __call__(self) -> dict[tuple, float]:
        """Every sample that grew since, by how much."""
        after = scrape(self._client)
        grown = {key: value - self._before.get(key, 0) for key, value in after.items()}
        return {key: value for key, value in grown.items() if value}


def test_requests_are_counted_by_route_template_method_and_status(client):
    growth = Growth(client)
    assert client.simulate_post("/plants", json=FERN).status_code == 200
    assert client.simulate_post("/plants", json={**FERN, "name": "rose"}).status_code == 409
    for _ in range(3):
        assert client.simulate_get("/plants/1").status_code == 200
    assert client.simulate_head("/plants/1").status_code == 200
    assert client.simulate_get("/plants/123456789").status_code == 404
    assert client.simulate_get("/plants", query_string="tag=green&limit=7").status_code == 200

    samples = growth()
    assert requests(samples, "/plants", "POST", "200") == 1
    assert requests(samples, "/plants", "POST", "409") == 1
    assert requests(samples, "/plants/{plant_id}", "GET", "200") == 3
    assert requests(samples, "/plants/{plant_id}", "HEAD", "200") == 1
    assert requests(samples, "/plants/{plant_id}", "GET", "404") == 1
    assert requests(samples, "/plants", "GET", "200") == 1


def test_puts_and_conditional_answers_are_counted_by_route_template(client):
    growth = Growth(client)
    tag = client.simulate_put("/plants/1", json=FERN).headers["etag"]
    for _ in range(2):
        assert client.simulate_put("/plants/1", json=FERN).status_code == 200
    assert (
        client.simulate_put("/plants/1", json=FERN, headers={"If-None-Match": "*"}).status_code
        == 412
    )
    assert client.simulate_put("/plants/1", json={"id": "x"}).status_code == 400
    assert (
        client.simulate_put("/plants/1", body="fern", content_type="text/plain").status_code == 415
    )
    for method in ("GET", "HEAD"):
        conditional = client.simulate_request(method, "/plants/1", headers={"If-None-Match": tag})
        assert conditional.status_code == 304
    assert client.simulate_delete("/plants/1", headers={"If-Match": '"other"'}).status_code == 412

    samples = growth()
    route = "/plants/{plant_id}"
    assert requests(samples, route, "PUT", "201") == 1
    assert requests(samples, route, "PUT", "200") == 2
    assert requests(samples, route, "PUT", "412") == 1
    assert requests(samples, route, "PUT", "400") == 1
    assert requests(samples, route, "PUT", "415") == 1
    assert requests(samples, route, "GET", "304") == 1
    assert requests(samples, route, "HEAD", "304") == 1
    assert requests(samples, route, "DELETE", "412") == 1
    assert samples[("plantstore_http_request_duration_seconds_count", ("route", route))] == 9


def test_no_label_holds_an_id_a_query_or_a_raw_path(client):
    growth = Growth(client)
    client.simulate_get("/plants/123456789")
    client.simulate_get("/plants/abc")
    client.simulate_get("/plants", query_string="tag=secret-tag&after=987654")
    client.simulate_get("/no/such/path/424242", query_string="q=hidden")
    client.simulate_get("/plants/1/2/3")

    text = client.simulate_get("/metrics").text
    for sent in ("123456789", "abc", "secret-tag", "987654", "424242", "hidden", "/no/such", "?"):
        assert sent not in text
    routes = {dict(key[1:]).get("route") for key in growth()} - {None}
    assert routes == {"/plants", "/plants/{plant_id}", "/metrics", "unmatched"}


def test_every_unknown_path_gets_one_label(client):
    growth = Growth(client)
    for path in ("/nope", "/plants/1/more", "/PLANTS", "/metrics/x"):
        assert client.simulate_get(path).status_code == 404
    assert requests(growth(), "unmatched", "GET", "404") == 4


# falcon.testing checks its environ with wsgiref.validate, which warns of a method it does not know.
@pytest.mark.filterwarnings("ignore::wsgiref.validate.WSGIWarning")
def test_a_method_falcon_does_not_route_is_labelled_other(client):
    growth = Growth(client)
    for method in ("FROB", "XYZZY"):
        client.simulate_request(method, "/plants")
    # Falcon refuses this one before any middleware sees the request, but not its answer.
    assert client.simulate_request("WEBSOCKET", "/plants").status_code == 400
    assert requests(growth(), "/plants", "other", "400") == 2
    samples = scrape(client)
    assert not any("FROB" in str(key) or "XYZZY" in str(key) for key in samples)
    # The refused request was never counted in flight, so it is not left there.
    assert samples[("plantstore_http_requests_in_flight",)] == 1  # the scrape itself


def test_latency_is_a_histogram_by_route(client):
    growth = Growth(client)
    for n in range(5):
        client.simulate_post("/plants", json={"id": n, "name": "fern"})
    client.simulate_get("/plants/1")

    samples = growth()
    histogram = "plantstore_http_request_duration_seconds"
    assert samples[(f"{histogram}_count", ("route", "/plants"))] == 5
    assert samples[(f"{histogram}_bucket", ("le", "+Inf"), ("route", "/plants"))] == 5
    assert samples[(f"{histogram}_count", ("route", "/plants/{plant_id}"))] == 1
    assert 0 < samples[(f"{histogram}_sum", ("route", "/plants"))] < 5
    bounds = [dict(key[1:])["le"] for key in scrape(client) if key[0] == f"{histogram}_bucket"]
    assert bounds[:1] == ["0.0005"] and bounds[-2:] == ["5.0", "+Inf"]


class BlockingStore(MemoryStore):
    """A memory store whose `get` waits, so a test can look while a request is in flight."""

    def __init__(self) -> None:
        super().__init__()
        self.entered = threading.Event()
        self.release = threading.Event()

    def get(self, plant_id):
        self.entered.set()
        assert self.release.wait(10)
        return super().get(plant_id)


def test_requests_in_flight_are_those_not_yet_answered(config):
    store = BlockingStore()
    client = falcon.testing.TestClient(
        create_app(config, store), headers={"Authorization": f"Bearer {TOKEN}"}
    )
    in_flight = ("plantstore_http_requests_in_flight",)
    assert scrape(client)[in_flight] == 1  # the scrape itself

    reader = threading.Thread(target=client.simulate_get, args=("/plants/1",))
    reader.start()
    try:
        assert store.entered.wait(10)
        assert scrape(client)[in_flight] == 2
    finally:
        store.release.set()
        reader.join(10)
    assert scrape(client)[in_flight] == 1


def test_no_count_is_lost_while_threads_answer_and_scrape_at_once(client):
    """Threads answer and a scrape reads the same values at once: every answer is counted."""
    per_thread = 100
    growth = Growth(client)

    def answer_or_scrape(n: int) -> None:
        for _ in range(per_thread):
            if n == 0:
                scrape(client)
            else:
                assert client.simulate_get("/plants/1").status_code == 404

    at_once(5, answer_or_scrape)
    samples = growth()
    assert requests(samples, "/plants/{plant_id}", "GET", "404") == 4 * per_thread
    histogram = "plantstore_http_request_duration_seconds_count"
    assert samples[(histogram, ("route", "/plants/{plant_id}"))] == 4 * per_thread
    assert scrape(client)[("plantstore_http_requests_in_flight",)] == 1


def test_plants_created_and_deleted_are_counted(client):
    growth = Growth(client)
    for n in (1, 2, 3, 3):
        assert client.simulate_post("/plants", json={"id": n, "name": "fern"}).status_code == 200
    assert client.simulate_post("/plants", json={"id": 1, "name": "rose"}).status_code == 409
    assert client.simulate_post("/plants", json={"id": "x"}).status_code == 400
    assert client.simulate_delete("/plants/2").status_code == 204
    assert client.simulate_delete("/plants/2").status_code == 404

    samples = growth()
    # The store does not tell a create from an identical repeat: both are answered 200.
    assert samples[("plantstore_plants_created_total",)] == 4
    assert samples[("plantstore_plants_deleted_total",)] == 1
    assert not any(key[0].endswith("_created") for key in scrape(client))


def test_a_put_that_makes_a_plant_counts_it_created_and_one_that_replaces_does_not(client):
    """As its webhook tells it: `plant.created` for a PUT's 201, `plant.updated` for its 200."""
    growth = Growth(client)
    assert client.simulate_put("/plants/1", json=FERN).status_code == 201
    assert client.simulate_put("/plants/1", json={"name": "rose"}).status_code == 200
    assert (
        client.simulate_put(
            "/plants/2", json={"name": "ivy"}, headers={"If-Match": "*"}
        ).status_code
        == 412
    )
    assert client.simulate_delete("/plants/1", headers={"If-Match": "*"}).status_code == 204
    samples = growth()
    assert samples[("plantstore_plants_created_total",)] == 1
    assert samples[("plantstore_plants_deleted_total",)] == 1


class UnavailableStore(MemoryStore):
    """A store whose database is gone: every call fails, and it is not ready."""

    def add(self, *args):
        raise StoreUnavailable("database is down")

    get = add

    def check_ready(self):
        raise StoreUnavailable("database is down")


def test_answers_503_for_a_store_that_cannot_serve_are_counted_by_route(config):
    client = falcon.testing.TestClient(
        create_app(config, UnavailableStore()), headers={"Authorization": f"Bearer {TOKEN}"}
    )
    growth = Growth(client)
    for _ in range(2):
        assert client.simulate_post("/plants", json=FERN).status_code == 503
    assert client.simulate_get("/plants/1").status_code == 503
    assert client.simulate_get("/readyz").status_code == 503

    samples = growth()
    unavailable = "plantstore_store_unavailable_total"
    assert samples[(unavailable, ("route", "/plants"))] == 2
    assert samples[(unavailable, ("route", "/plants/{plant_id}"))] == 1
    assert samples[(unavailable, ("route", "/readyz"))] == 1
    assert requests(samples, "/plants", "POST", "503") == 2


class SwitchedStore(MemoryStore):
    is_ready = True
    asked = 0

    def check_ready(self):
        self.asked += 1
        if not self.is_ready:
            raise StoreUnavailable("switched off")


def test_a_scrape_tells_readiness_as_last_found_asking_the_store_once_a_second_at_most():
    """A durable store's check writes: scrapes share `/readyz`'s answer, however many come."""
    store = SwitchedStore()
    clock = Clock()
    app = falcon.App()
    endpoint = MetricsEndpoint(
        process_metrics(),
        ReadinessCheck(store, clock),
        store,
        store_kind="memory",
        webhooks=False,
        public=True,
    )
    app.add_route("/metrics", endpoint)
    client = falcon.testing.TestClient(app)
    assert scrape(client)[("plantstore_store_ready",)] == 1
    store.is_ready = False
    assert scrape(client)[("plantstore_store_ready",)] == 1
    assert store.asked == 1
    clock.now += READY_ANSWER_SECONDS
    assert scrape(client)[("plantstore_store_ready",)] == 0
    store.is_ready = True
    clock.now += READY_ANSWER_SECONDS
    assert scrape(client)[("plantstore_store_ready",)] == 1
    assert store.asked == 3


def test_build_info_names_the_version_and_the_kind_of_store_never_its_url():
    url = "postgresql://plantstore:hunter2@db.internal:5432/plants"
    config = Config(tokens=frozenset({TOKEN}), store_url=url)
    client = falcon.testing.TestClient(
        create_app(config, MemoryStore()), headers={"Authorization": f"Bearer {TOKEN}"}
    )
    text = client.simulate_get("/metrics").text
    # The port as a label's value or after its host: its digits alone may be in any figure
    # (a process's start time, say).
    for secret in ("hunter2", "db.internal", '"5432"', ":5432", "postgresql://"):
        assert secret not in text
    info = ("plantstore_build_info", ("store", "postgresql"), ("version", version("plantstore")))
    assert scrape(client)[info] == 1


def test_metrics_need_the_token(anonymous, client):
    for headers in ({}, {"Authorization": "Bearer not-a-token"}):
        result = anonymous.simulate_get("/metrics", headers=headers)
        assert result.status_code == 401
        assert result.headers["content-type"] == "application/json"
        assert result.json["error"] == 401
        assert "plantstore_" not in result.text
    assert client.simulate_get("/metrics").status_code == 200


def test_metrics_are_public_with_the_setting(store):
    config = Config.from_env({"PLANTSTORE_TOKENS": TOKEN, "PLANTSTORE_METRICS_PUBLIC": "1"})
    anonymous = falcon.testing.TestClient(create_app(config, store))
    assert anonymous.simulate_get("/metrics").status_code == 200
    # Only the metrics: everything else still needs the token.
    assert anonymous.simulate_get("/plants/1").status_code == 401
    assert anonymous.simulate_head("/metrics").status_code == 200


@pytest.mark.parametrize("value", ["yes", "true", "2", "on"])
def test_the_setting_is_1_or_0(value):
    with pytest.raises(ConfigError, match="PLANTSTORE_METRICS_PUBLIC must be 1 or 0"):
        Config.from_env({"PLANTSTORE_TOKENS": TOKEN, "PLANTSTORE_METRICS_PUBLIC": value})
    for off in ("", "0"):
        environ = {"PLANTSTORE_TOKENS": TOKEN, "PLANTSTORE_METRICS_PUBLIC": off}
        assert not Config.from_env(environ).metrics_public


def test_a_path_prefix_is_not_part_of_the_route(client):
    growth = Growth(client)
    client.simulate_get("/plants/1", extras={"SCRIPT_NAME": "/api"})
    assert requests(growth(), "/plants/{plant_id}", "GET", "404") == 1


# Each process answers `count` requests with metrics kept in PROMETHEUS_MULTIPROC_DIR; one
# that answers none then scrapes.
_WORKER = """
import sys
import falcon.testing
from plantstore.app import create_app
from plantstore.config import Config
from plantstore.stores.memory import MemoryStore

client = falcon.testing.TestClient(
    create_app(Config(tokens=frozenset({"t"})), MemoryStore()),
    headers={"Authorization": "Bearer t"},
)
for n in range(int(sys.argv[1])):
    assert client.simulate_post("/plants", json={"id": n, "name": "fern"}).status_code == 200
if sys.argv[1] == "0":
    print(client.simulate_get("/metrics").text)
"""


@pytest.mark.slow
def test_in_multiprocess_mode_a_scrape_adds_up_every_process(tmp_path):
    environ = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(tmp_path)}

    def run(count: int) -> str:
        return subprocess.run(
            [sys.executable, "-c", _WORKER, str(count)],
            env=environ,
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout

    run(3)
    run(4)
    families = {family.name: family for family in text_string_to_metric_families(run(0))}
    (created,) = families["plantstore_plants_created"].samples
    assert created.value == 7
    (posts,) = [
        sample
        for sample in families["plantstore_http_requests"].samples
        if sample.labels == {"route": "/plants", "method": "POST", "status": "200"}
    ]
    assert posts.value == 7


# Answers of every kind the metrics tell apart, then the scrape.
_EVERY_KIND = """
import falcon.testing
from plantstore.app import create_app
from plantstore.config import Config
from tests.operations.test_metrics import OutageAtSeven, call_refused_before_middleware

app = create_app(Config(tokens=frozenset({"t"})), OutageAtSeven())
client = falcon.testing.TestClient(app, headers={"Authorization": "Bearer t"})
for plant_id in (1, 2, 2):
    client.simulate_post("/plants", json={"id": plant_id, "name": "fern"})
client.simulate_post("/plants", json={"id": "x"})
client.simulate_delete("/plants/2")
client.simulate_get("/plants/9")
client.simulate_get("/plants/7")
client.simulate_get("/nowhere")
call_refused_before_middleware(app)
print(client.simulate_get("/metrics").text)
"""


class OutageAtSeven(MemoryStore):
    """A memory store that cannot serve plant 7."""

    def get(self, plant_id):
        if plant_id == 7:
            raise StoreUnavailable("database is down")
        return super().get(plant_id)


def call_refused_before_middleware(app) -> None:
    """A method Falcon refuses before any middleware's process_request: never in flight."""
    environ = falcon.testing.create_environ(path="/plants", method="WEBSOCKET")
    app(environ, lambda status, headers: None)


@pytest.mark.slow
def test_both_modes_give_the_same_series(tmp_path):
    """A dashboard shows the same series whether one process or gunicorn's workers serve."""

    def samples(**environ) -> dict[tuple, float]:
        text = subprocess.run(
            [sys.executable, "-c", _EVERY_KIND],
            env={**os.environ, **environ},
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        return {
            (sample.name, *sorted(sample.labels.items())): sample.value
            for family in text_string_to_metric_families(text)
            for sample in family.samples
            # Which bucket a request falls in, and the sum, depend on how long it took.
            if not sample.name.endswith(("_bucket", "_sum"))
        }

    single = samples()
    assert samples(PROMETHEUS_MULTIPROC_DIR=str(tmp_path)) == single
    assert requests(single, "unmatched", "WEBSOCKET", "400") == 1
    assert single[("plantstore_plants_created_total",)] == 3
    assert single[("plantstore_plants_deleted_total",)] == 1
    assert single[("plantstore_store_unavailable_total", ("route", "/plants/{plant_id}"))] == 1


@pytest.mark.slow
def test_under_gunicorn_every_worker_counts_even_dead_ones_and_nothing_is_left(tmp_path):
    """Whichever worker answers, a scrape counts the requests of all, those since replaced too.

    Both first workers are killed, so every request counted was answered by a dead one.
    """
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    server, temporary = sqlite_workers(tmp_path, 2, PROMETHEUS_MULTIPROC_DIR=str(elsewhere))
    reads = 12
    try:
        for n in range(reads):
            headers = {"Authorization": f"Bearer {TOKEN}"}
            assert server.request("GET", f"/plants/{n}", headers=headers)[0] == 404
        # gunicorn refuses this itself: the app never sees it, and does not count it.
        with socket.create_connection(("127.0.0.1", server.port), timeout=10) as garbled:
            garbled.sendall(b"NOT A REQUEST LINE\r\n\r\n")
            assert [answer.status for answer in parse_answers(read_until_closed(garbled))] == [400]
        # Only the metrics' directory: a worker's heartbeat file passes through TMPDIR too.
        (directory,) = temporary.glob("plantstore-metrics-*")
        first = wait_for(lambda: len(pids := server.worker_pids()) == 2 and pids, "two workers")
        # A worker makes its files when it loads the app, which it announces nowhere.
        wait_for(
            lambda: all((directory / f"gauge_livesum_{pid}.db").exists() for pid in first),
            "both workers to load the app",
        )
        for victim in first:
            os.kill(victim, signal.SIGKILL)
            wait_for(lambda victim=victim: replacements(server, victim), "a new worker")
        live = {path.name for path in directory.glob("gauge_live*.db")}
        assert not any(name.endswith(f"_{pid}.db") for pid in first for name in live)

        samples = scrape_server(server)
        assert requests(samples, "/plants/{plant_id}", "GET", "404") == reads
        assert samples[("plantstore_http_requests_in_flight",)] == 1
        assert not any(dict(key[1:]).get("status") == "400" for key in samples)
    finally:
        server.stop()
    assert list(temporary.iterdir()) == []
    assert list(elsewhere.iterdir()) == []


@pytest.mark.slow
def test_a_preloaded_app_with_several_workers_is_refused(tmp_path):
    """Loaded in the master, prometheus_client keeps each worker's counts in its own memory."""
    started = run_to_exit(
        "--preload",
        "--bind=127.0.0.1:0",
        PLANTSTORE_TOKENS=TOKEN,
        PLANTSTORE_STORE=f"sqlite:///{tmp_path / 'plants.db'}",
        WEB_CONCURRENCY="2",
        TMPDIR=str(tmp_path),
    )
    assert started.returncode != 0
    assert "plantstore: with --preload each worker would count alone in /metrics" in started.stderr
    assert not list(tmp_path.glob("plantstore-metrics-*"))


@pytest.mark.slow
def test_a_start_removes_the_metrics_directories_of_masters_that_are_gone(tmp_path):
    """A master killed with SIGKILL cannot remove its directory: the next start does."""
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    gone = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    stale = temporary / f"plantstore-metrics-{gone}-a1b2c3"
    stale.mkdir()
    (stale / "counter_123.db").write_bytes(b"")
    running = temporary / f"plantstore-metrics-{os.getpid()}-d4e5f6"
    running.mkdir()
    server = GunicornServer(
        server_environ(PLANTSTORE_TOKENS=TOKEN, TMPDIR=str(temporary)), log_dir=tmp_path
    )
    try:
        assert server.request("GET", "/healthz")[0] == 200
        assert not stale.exists()
        assert running.exists()
    finally:
        server.stop()


def test_the_operations_page_lists_every_metric_and_only_those(worker_app, sqlite_url):
    """docs/operations.md's table, row by row: each metric a scrape has, with its type.

    A durable store's app, whose commits are counted too."""
    app = worker_app(Config(tokens=frozenset({TOKEN}), store_url=sqlite_url))
    client = falcon.testing.TestClient(app, headers={"Authorization": f"Bearer {TOKEN}"})
    result = client.simulate_get("/metrics")
    scraped = {
        family.name + ("_total" if family.type == "counter" else ""): family.type
        for family in text_string_to_metric_families(result.text)
    }
    section = (ROOT / "docs/operations.md").read_text().split("\n## Metrics\n")[1].split("\n## ")[0]
    table = dict(re.findall(r"^\| `(\w+)` \| (\w+) \|", section, flags=re.MULTILINE))
    assert table == scraped
