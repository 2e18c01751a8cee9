"""Fixtures for every folder of tests: the app and its clients, each kind of store, files and
disks that fail. The PostgreSQL ones come from plantstore/testing/fixtures.py, which setup.cfg
loads for the bench's tests too."""

import contextlib
import os
import subprocess

import falcon.testing
import hypothesis
import pytest

from plantstore.app import create_app
from plantstore.config import Config
from plantstore.runtime import Runtime
from plantstore.stores import open_store
from plantstore.stores.memory import MemoryStore
from plantstore.testing.webhook_receiver import WebhookReceiver
from tests.support.settled import settled

TOKEN = "test-token-1"
SECOND_TOKEN = "test-token-2"


@pytest.fixture
def config():
    return Config(tokens=frozenset({TOKEN, SECOND_TOKEN}), max_body_bytes=4096)


@pytest.fixture
def store():
    return MemoryStore()


@pytest.fixture
def app(config, store):
    return create_app(config, store)


@pytest.fixture
def client(app):
    """A client that sends an accepted bearer token with every request."""
    return falcon.testing.TestClient(app, headers={"Authorization": f"Bearer {TOKEN}"})


@pytest.fixture
def anonymous(app):
    """A client that sends no credentials."""
    return falcon.testing.TestClient(app)


@pytest.fixture
def worker_app():
    """Build apps as a gunicorn worker does: on a started `Runtime`, closed when the test ends."""
    with contextlib.ExitStack() as opened:

        def build(config: Config) -> falcon.App:
            runtime = opened.enter_context(Runtime(config))
            return create_app(config, runtime.store)

        yield build


@pytest.fixture
def sqlite_url(tmp_path):
    return f"sqlite:///{tmp_path / 'plants.db'}"


@pytest.fixture(params=["a directory", "a path in /proc", "not a database"])
def unusable_sqlite(request, tmp_path):
    """A `PLANTSTORE_STORE` naming a SQLite file that no wait makes usable, and the one line
    that stops a start for it."""
    path = tmp_path / "plants.db"
    reason = "unable to open database file"
    if request.param == "a directory":
        path.mkdir()
    elif request.param == "a path in /proc":
        path = "/proc/plants.db"
    else:
        path.write_text("plants, one a line\n" * 100)
        reason = "file is not a database"
    return f"sqlite:///{path}", (
        "plantstore: PLANTSTORE_STORE must name a SQLite database file that this user can read "
        f"and write, or make: {path}: {reason}"
    )


@pytest.fixture
def small_disk(tmp_path):
    """A tmpfs of 1 MiB, for a test to fill; skipped where this process may not mount one."""
    mountpoint = tmp_path / "disk"
    mountpoint.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=1m", "plantstore-test", mountpoint],
        capture_output=True,
        text=True,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs to fill: {mounted.stderr.strip()}")
    yield mountpoint
    subprocess.run(["umount", "--lazy", mountpoint], check=True)


@pytest.fixture
def immutable(tmp_path):
    """Make files immutable (`chattr +i`, which binds root too) and mutable again after, those
    still there: a test may have made one mutable itself, and a store removed it."""
    made = []

    def make(*paths):
        done = subprocess.run(["chattr", "+i", *paths], capture_output=True, text=True)
        if done.returncode != 0:
            pytest.skip(f"cannot make a file immutable: {done.stderr.strip()}")
        made.extend(paths)

    yield make
    if left := [path for path in made if os.path.exists(path)]:
        subprocess.run(["chattr", "-i", *left], check=True)


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def store_url(request):
    """The URL of each kind of store in turn, each empty."""
    if request.param == "memory":
        return "memory://"
    return request.getfixturevalue(f"{request.param}_url")


@pytest.fixture
def any_store(store_url):
    """Each kind of store in turn, opened as the service opens it, for property tests too: its
    pool makes no connection while hypothesis draws (`settled`)."""
    opened = settled(open_store(store_url))
    yield opened
    opened.close()


# Property tests draw the same examples on every run, so CI is reproducible, and a bounded number.
hypothesis.settings.register_profile(
    "plantstore", derandomize=True, database=None, max_examples=200, deadline=None
)
hypothesis.settings.load_profile("plantstore")


_FIGURES: list[str] = []


@pytest.fixture(scope="session")
def note_figure():
    """Let a test note a figure it measured; they are printed together when the run ends."""
    return _FIGURES.append


def pytest_terminal_summary(terminalreporter):
    if _FIGURES:
        terminalreporter.section("figures of this run")
        for figure in _FIGURES:
            terminalreporter.write_line(figure)


@pytest.fixture
def browser(tmp_path):
    """A fresh headless Chromium (tests/support/browser.py; selenium comes with the `outside`
    extra)."""
    from tests.support.browser import chromium

    with chromium(tmp_path / "profile") as driver:
        yield driver


@pytest.fixture
def receiver():
    """A subscriber on loopback that verifies every delivery it is sent."""
    with WebhookReceiver() as opened:
        yield opened
