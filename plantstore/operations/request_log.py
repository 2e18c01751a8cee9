"""What the logs say of each request: who sent it, its id, and the route it took.

gunicorn's access log reads them after the app ran: the client from `REMOTE_ADDR` (`%(h)s`), the
id from the answer's `X-Request-ID`, and the route from the environ (the JSON log's `route`).
The error log reads the id from `current_request_id`, for the lines logged while the request
is served. One middleware does it all: Falcon's dispatch of a middleware costs more than each
of these.
"""

import ipaddress
import random
import re
from collections.abc import Iterable
from dataclasses import dataclass

from plantstore.operations.logs import ROUTE_KEY, current_request_id

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network


@dataclass(frozen=True)
class TrustedProxies:
    """gunicorn's `forwarded_allow_ips`, parsed once: gunicorn and the app trust the same peers.

    gunicorn's own rule: a unix-socket peer always, a TCP peer when its address is in one of the
    networks, every peer with `*`.
    """

    networks: tuple[Network, ...]
    everyone: bool

    @classmethod
    def parse(cls, entries: Iterable[str]) -> "TrustedProxies":
        """Read addresses and networks, as gunicorn checked them; `*` is everyone."""
        entries = [entry.strip() for entry in entries]
        networks = tuple(ipaddress.ip_network(entry) for entry in entries if entry != "*")
        return cls(networks, "*" in entries)

    def trusts(self, peer: str) -> bool:
        if not peer:
            return True  # a unix socket: only the processes its permissions let in reach it
        address = _address(peer)
        return address is not None and (
            self.everyone or any(address in network for network in self.networks)
        )


#: An incoming X-Request-ID is echoed only when it is this tame: safe in a header and a log line.
_SANE_REQUEST_ID = re.compile(r"[A-Za-z0-9._:@-]{1,128}")


def request_id(sent: str | None) -> str:
    """The id of a request: the client's own `X-Request-ID` when sane, else 128 fresh bits.

    The id must be unique, not secret: `random` (which Python reseeds in every forked worker)
    makes it without the system call that `uuid4`'s `os.urandom` is at every request.
    """
    if sent is not None and _SANE_REQUEST_ID.fullmatch(sent):
        return sent
    return random.randbytes(16).hex()


class RequestLog:
    """Put the client's address into `REMOTE_ADDR`, give the answer its `X-Request-ID`, and
    leave the route's template in the environ.

    gunicorn sets REMOTE_ADDR to the peer, which behind a proxy is the proxy (or nothing at
    all over a unix socket). From a trusted proxy (`trusted`), the client is the last address
    in X-Forwarded-For: the one the proxy appended itself; those before it are the client's own
    say-so. From a peer that is not trusted, the header is ignored.
    """

    def __init__(self, trusted: TrustedProxies) -> None:
        self._trusted = trusted

    def process_request(self, req, resp):
        # Read from the WSGI environ: `req.get_header` costs ten times as much when absent.
        env = req.env
        forwarded_for = env.get("HTTP_X_FORWARDED_FOR")
        if forwarded_for and self._trusted.trusts(env.get("REMOTE_ADDR", "")):
            client = forwarded_for.rpartition(",")[2].strip()
            if _address(client):
                env["REMOTE_ADDR"] = client
        rid = request_id(env.get("HTTP_X_REQUEST_ID"))
        resp.set_header("X-Request-ID", rid)
        current_request_id.set(rid)

    def process_resource(self, req, resp, resource, params):
        req.env[ROUTE_KEY] = req.uri_template


def _address(text: str) -> Address | None:
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        return None
