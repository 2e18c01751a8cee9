"""Behind a trusted proxy, REMOTE_ADDR (and so the access log) names the forwarded client."""

import falcon.testing
import pytest
from gunicorn.config import Config as GunicornConfig

from plantstore.app import create_app
from plantstore.config import Config
from plantstore.stores.memory import MemoryStore


def remote_addr_seen(config, peer, forwarded_for):
    """The REMOTE_ADDR that gunicorn's access log reads from the environ after the app ran."""
    environ = falcon.testing.create_environ(path="/healthz", remote_addr=peer)
    if forwarded_for is not None:
        environ["HTTP_X_FORWARDED_FOR"] = forwarded_for
    create_app(config, MemoryStore())(environ, falcon.testing.StartResponseMock())
    return environ["REMOTE_ADDR"]


@pytest.mark.parametrize(
    ("peer", "forwarded_for", "seen"),
    [
        ("127.0.0.1", "203.0.113.7", "203.0.113.7"),
        ("::1", "2001:db8::7", "2001:db8::7"),
        ("127.0.0.1", "198.51.100.1, 203.0.113.7", "203.0.113.7"),
        ("", "203.0.113.7", "203.0.113.7"),
        ("127.0.0.1", None, "127.0.0.1"),
        ("127.0.0.1", "not-an-address", "127.0.0.1"),
        ("127.0.0.1", "203.0.113.7, 198.51.100.1 x", "127.0.0.1"),
        ("192.0.2.1", "203.0.113.7", "192.0.2.1"),
    ],
)
def test_only_a_trusted_peer_names_the_client(config, peer, forwarded_for, seen):
    assert remote_addr_seen(config, peer, forwarded_for) == seen


@pytest.mark.parametrize(
    ("allowed", "peer", "seen"),
    [
        ("10.0.0.0/8", "10.1.2.3", "203.0.113.7"),
        ("10.0.0.0/8", "127.0.0.1", "127.0.0.1"),
        ("*", "192.0.2.1", "203.0.113.7"),
        ("", "127.0.0.1", "127.0.0.1"),
        ("", "", "203.0.113.7"),
        (" 10.0.0.0/8 , 192.0.2.1", "192.0.2.1", "203.0.113.7"),
    ],
)
def test_the_trusted_proxies_are_gunicorns(config, allowed, peer, seen):
    """A worker hands the app gunicorn's `forwarded_allow_ips`, as gunicorn read it."""
    gunicorn = GunicornConfig()
    gunicorn.set("forwarded_allow_ips", allowed)
    config = Config(tokens=config.tokens, forwarded_allow_ips=tuple(gunicorn.forwarded_allow_ips))
    assert remote_addr_seen(config, peer, "203.0.113.7") == seen
