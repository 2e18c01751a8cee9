"""The subscribers `PLANTSTORE_WEBHOOK_URLS` lists: how the outbox and the log name each one,
and what every attempt to reach it sends.

A URL may carry a user and password (`https://user:secret@hooks.example/in`), which its
subscriber checks as HTTP Basic authentication, sent as browsers and curl send them. They go
in the `Authorization` header of the attempts to that URL and nowhere else: not to another URL
(an attempt follows no redirect), not into the database, not into a log line.
"""

import hashlib
from typing import NamedTuple
from urllib.parse import urlsplit

from urllib3.util import Url, make_headers, parse_url


class Subscriber(NamedTuple):
    """One URL of `PLANTSTORE_WEBHOOK_URLS`, as attempts reach it."""

    #: The outbox's name for it: `subscriber_key`.
    key: str
    #: Where attempts go: the URL without its user and password.
    url: str
    #: Sent with every attempt: Basic authorization, when the URL has a user.
    headers: dict[str, str]
    #: How the log names it: its origin and key, never its path, query or credentials.
    name: str


def subscriber(url: str) -> Subscriber:
    """The subscriber at `url`, its user and password percent-decoded as UTF-8."""
    credentials = parse_url(url).auth_decoded_joined
    headers = (
        {}
        if credentials is None
        else make_headers(basic_auth=credentials, basic_auth_encoding="utf-8")
    )
    key = subscriber_key(url)
    return Subscriber(key, _without_credentials(url), headers, f"{origin(url)} (subscriber {key})")


def subscriber_key(url: str) -> str:
    """Name the subscriber at `url` without telling its URL: the first 16 hex digits of the
    SHA-256 of the URL without its user and password (as urllib3 writes it).

    The same in every worker and every run, so a delivery waiting in the outbox finds its URL
    again after a restart; and the same when only the password changes. Nothing of the
    password goes into it, so a key in a log line is no help in guessing one.
    """
    return hashlib.sha256(_without_credentials(url).encode()).hexdigest()[:16]


def origin(url: str) -> str:
    """The scheme, host and port of `url`: never its user, password, path or query."""
    parts = urlsplit(url)
    host = f"[{parts.hostname}]" if ":" in (parts.hostname or "") else parts.hostname
    return f"{parts.scheme}://{host}" + (f":{parts.port}" if parts.port else "")


def _without_credentials(url: str) -> str:
    parsed = parse_url(url)
    return Url(
        scheme=parsed.scheme,
        host=parsed.host,
        port=parsed.port,
        path=parsed.path,
        query=parsed.query,
        fragment=parsed.fragment,
    ).url
