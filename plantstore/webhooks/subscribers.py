"""The subscribers `PLANTSTORE_WEBHOOK_URLS` lists: how the outbox and the log name each one,
and what every attempt to reach it sends.

A URL may carry a user and password (`https://user:secret@hooks.example/in`), which its
subscriber checks as HTTP Basic authentication, sent as browsers and curl send them. They go
in the `Authorization` header of the attempts to that URL and nowhere else: not to another URL
(an attempt follows no redirect), not into the database, not into a log line.
"""

from typing import NamedTuple
from urllib.parse import urlsplit

from urllib3.util import make_headers, parse_url

from plantstore.core.events import subscriber_key, without_credentials


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
    return Subscriber(key, without_credentials(url), headers, f"{origin(url)} (subscriber {key})")


def origin(url: str) -> str:
    """The scheme, host and port of `url`: never its user, password, path or query."""
    parts = urlsplit(url)
    host = f"[{parts.hostname}]" if ":" in (parts.hostname or "") else parts.hostname
    return f"{parts.scheme}://{host}" + (f":{parts.port}" if parts.port else "")
