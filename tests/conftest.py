import falcon.testing
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
