"""The client's address, as a trusted reverse proxy forwarded it, and which proxies are trusted."""

import ipaddress
from dataclasses import dataclass

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network


@dataclass(frozen=True)
class TrustedProxies:
    """`FORWARDED_ALLOW_IPS`, parsed once: gunicorn and the app trust the same peers.

    gunicorn's own rule: a unix-socket peer always, a TCP peer when its address is in one of the
    networks, every peer with `*`. `str()` gives the list back as gunicorn's setting reads it.
    """

    entries: tuple[str, ...]
    networks: tuple[Network, ...]
    everyone: bool

    @classmethod
    def parse(cls, text: str) -> "TrustedProxies":
        """Read a comma-separated list; ValueError names the first entry that is no network."""
        entries = tuple(entry.strip() for entry in text.split(",") if entry.strip())
        networks = []
        for entry in entries:
            if entry != "*":
                try:
                    networks.append(ipaddress.ip_network(entry))
                except ValueError:
                    raise ValueError(entry) from None
        return cls(entries, tuple(networks), "*" in entries)

    def trusts(self, peer: str) -> bool:
        if not peer:
            return True  # a unix socket: only the processes its permissions let in reach it
        address = _address(peer)
        return address is not None and (
            self.everyone or any(address in network for network in self.networks)
        )

    def __str__(self) -> str:
        return ",".join(self.entries)


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
