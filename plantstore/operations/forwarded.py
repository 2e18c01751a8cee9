"""The client's address, as a trusted reverse proxy forwarded it, for the access log."""

import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass

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


class ForwardedClient:
    """Put the client's address from a trusted proxy's `X-Forwarded-For` into `REMOTE_ADDR`.

    gunicorn sets REMOTE_ADDR to the peer, which behind a proxy is the proxy (or nothing at
    all over a unix socket), and its access log (`%(h)s`) reads REMOTE_ADDR after the app ran.
    Only the last address in X-Forwarded-For counts: the one the trusted proxy appended itself;
    those before it are the client's own say-so. From a peer that is not trusted, the header is
    ignored.
    """

    def __init__(self, trusted: TrustedProxies) -> None:
        self._trusted = trusted

    def process_request(self, req, resp):
        # Read from the WSGI environ: `req.get_header` costs ten times as much when absent.
        forwarded_for = req.env.get("HTTP_X_FORWARDED_FOR")
        if forwarded_for and self._trusted.trusts(req.env.get("REMOTE_ADDR", "")):
            client = forwarded_for.rpartition(",")[2].strip()
            if _address(client):
                req.env["REMOTE_ADDR"] = client


def _address(text: str) -> Address | None:
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        return None
