"""Real Prometheus scraping real gunicorn: every request counted, across workers and a restart."""

import json
import os
import shutil
import signal
import socket
import subprocess
import time
import urllib.parse
import urllib.request

import pytest

from tests.support.workers import replacements, sqlite_workers, wait_for

pytestmark = pytest.mark.slow

TOKEN = "prometheus-test-token"
AUTH = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
#: Creates sent before a worker is killed, and after its replacement is in place.
BEFORE, AFTER = 45, 35

CONFIG = """
global:
  scrape_interval: 500ms
  scrape_timeout: 400ms
scrape_configs:
  - job_name: plantstore
    authorization:
      credentials: {token}
    static_configs:
      - targets: ["127.0.0.1:{port}"]
  - job_name: anonymous
    static_configs:
      - targets: ["127.0.0.1:{port}"]
"""


def free_port() -> int:
    with socket.create_server(("127.0.0.1", 0)) as probe:
        return probe.getsockname()[1]


class Prometheus:
    """Debian's prometheus, with a configuration and a database of the test's own, on loopback."""

    def __init__(self, directory, target_port: int) -> None:
        config = directory / "prometheus.yml"
        config.write_text(CONFIG.format(token=TOKEN, port=target_port))
        self.port = free_port()
        self._log = open(directory / "prometheus.log", "w")  # noqa: SIM115 (closed by stop)
        self._process = subprocess.Popen(
            [
                shutil.which("prometheus"),
                f"--config.file={config}",
                f"--storage.tsdb.path={directory / 'data'}",
                f"--web.listen-address=127.0.0.1:{self.port}",
            ],
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        wait_for(self._ready, "Prometheus to be ready")

    def _ready(self) -> bool:
        assert self._process.poll() is None, "Prometheus exited; see prometheus.log"
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/-/ready", timeout=5):
                return True
        except OSError:
            return False

    def query(self, promql: str) -> list[dict]:
        """The result of an instant query, now."""
        query = urllib.parse.urlencode({"query": promql})
        url = f"http://127.0.0.1:{self.port}/api/v1/query?{query}"
        with urllib.request.urlopen(url, timeout=10) as answer:
            body = json.load(answer)
        assert body["status"] == "success", body
        return body["data"]["result"]

    def value(self, promql: str) -> float | None:
        """The single value a query gives, or None while it gives none."""
        result = self.query(promql)
        return float(result[0]["value"][1]) if result else None

    def stop(self) -> None:
        self._process.send_signal(signal.SIGTERM)
        try:
            self._process.wait(30)
        finally:
            self._log.close()


def last_scrape(prometheus, job: str) -> float:
    """The time of the latest scrape of `job`, as Prometheus stamped it (0 before the first)."""
    return prometheus.value(f'timestamp(up{{job="{job}"}})') or 0


def create(server, first: int, count: int) -> None:
    """Create `count` plants, each on a connection of its own, so any worker may answer it."""
    for plant_id in range(first, first + count):
        body = json.dumps({"id": plant_id, "name": f"plant {plant_id}"})
        assert server.request("POST", "/plants", body, AUTH)[0] == 200


@pytest.fixture
def prometheus_binary():
    if shutil.which("prometheus") is None:
        pytest.skip("needs Debian's prometheus package (.ci/run installs it)")


def test_prometheus_counts_every_request_across_workers_and_a_restart(tmp_path, prometheus_binary):
    server, temporary = sqlite_workers(tmp_path, 3, log_dir=tmp_path, PLANTSTORE_TOKENS=TOKEN)
    try:
        prometheus = Prometheus(tmp_path, server.port)
        try:
            create(server, 0, BEFORE)
            victim = server.worker_pids()[0]
            os.kill(victim, signal.SIGKILL)
            wait_for(lambda: replacements(server, victim, 3), "a new worker in its place")
            create(server, BEFORE, AFTER)
            sent = time.time()

            # Prometheus stamps a sample with the time its scrape began: one begun after the
            # last answer has seen every request.
            wait_for(lambda: last_scrape(prometheus, "plantstore") > sent, "a scrape", 30)
            assert prometheus.value('up{job="plantstore"}') == 1
            total = 'sum(plantstore_http_requests_total{route="/plants",method="POST"})'
            assert prometheus.value(total) == BEFORE + AFTER
            assert prometheus.value("plantstore_plants_created_total") == BEFORE + AFTER
            assert prometheus.value("plantstore_store_ready") == 1
            # Without its token, Prometheus is refused: the scrape is down.
            wait_for(lambda: last_scrape(prometheus, "anonymous"), "an anonymous scrape", 30)
            assert prometheus.value('up{job="anonymous"}') == 0
        finally:
            prometheus.stop()
    finally:
        access_log, _ = server.stop()
    assert list(temporary.iterdir()) == []
    scrapes = [line for line in access_log.splitlines() if '"GET /metrics"' in line]
    assert any("status=200" in line for line in scrapes)
    assert any("status=401" in line for line in scrapes)
