"""The client's address, as a trusted reverse proxy forwarded it."""

import ipaddress
from collections.abc import Iterable


class ForwardedClient:
    """Put the client's address from a trusted proxy's `X-Forwarded-For` into `REMOTE_ADDR`.

    gunicorn sets REMOTE_ADDR to the peer, which behind a proxy is the proxy (or nothing at
    all over a unix socket), and its access log (`%(h)s`) reads REMOTE_ADDR after the app ran.
    The peer is trusted by gunicorn's own rule for `forwarded_allow_ips`: a unix-socket peer
    always, a TCP peer when its address is in the list (`*` is everyone). Only the last address
    in X-Forwarded-For counts: the one the trusted proxy appended itself; those before it are
    the client's own say-so. From a peer that is not trusted, the header is ignored.
    """

    def __init__(self, forwarded_allow_ips: Iterable[str]) -> None:
        allowed = tuple(forwarded_allow_ips)
        self._trusts_everyone = "*" in allowed
        self._networks = tuple(ipaddress.ip_network(entry) for entry in allowed if entry != "*")

    def process_request(self, req, resp):
        # Read from the WSGI environ: `req.get_header` costs ten times as much when absent.
        forwarded_for = req.env.get("HTTP_X_FORWARDED_FOR")
        if forwarded_for and self._trusts(req.env.get("REMOTE_ADDR", "")):
            client = forwarded_for.rpartition(",")[2].strip()
            if _address(client):
                req.env["REMOTE_ADDR"] = client

    def _trusts(self, peer: str) -> bool:
        if not peer:
            return True  # a unix socket: only the processes its permissions let in reach it
        address = _address(peer)
        return address is not None and (
            self._trusts_everyone or any(address in network for network in self._networks)
        )


def _address(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        return None
