import falcon.testing
import hypothesis
import pytest

from plantstore.app import create_app
from plantstore.config import Config
from plantstore.stores.memory import MemoryStore

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
