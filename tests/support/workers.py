"""The real gunicorn's workers as tests of several parts drive them: several on one SQLite
store, a scrape of their metrics, and a wait for the master to replace one that was killed."""

import time
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from plantstore.testing.gunicorn_server import GunicornServer, server_environ
from tests.conftest import TOKEN


def scrape_server(server) -> dict[tuple, float]:
    status, _, body = server.request(
        "GET", "/metrics", headers={"Authorization": f"Bearer {TOKEN}"}
    )
    assert status == 200
    return {
        (sample.name, *sorted(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(body.decode())
        for sample in family.samples
    }


def sqlite_workers(tmp_path, workers: int, log_dir=None, **environ) -> tuple[GunicornServer, Path]:
    """gunicorn with `workers` workers on a SQLite store, and the directory of its temporary files.

    The directory is its own, so that a test can tell what the run left there; `environ` adds
    settings, or changes these.
    """
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    settings = {
        "PLANTSTORE_TOKENS": TOKEN,
        "PLANTSTORE_STORE": f"sqlite:///{tmp_path / 'plants.db'}",
        "WEB_CONCURRENCY": str(workers),
        "TMPDIR": str(temporary),
        **environ,
    }
    return GunicornServer(server_environ(**settings), log_dir=log_dir), temporary


def wait_for(condition, what: str, patience: float = 30):
    """Poll gunicorn's files or its process list, which announce nothing, for a bounded time."""
    deadline = time.monotonic() + patience
    while not (outcome := condition()):
        assert time.monotonic() < deadline, f"waited {patience} s for {what}"
        time.sleep(0.05)
    return outcome


def replacements(server, victim: int, count: int = 2) -> list[int] | None:
    """The `count` workers, once the master has put a new one in place of `victim`."""
    workers = server.worker_pids()
    return workers if len(workers) == count and victim not in workers else None
