"""Configuration, read from the environment in one place.

Reading has no side effects: it neither changes the environment nor prints, so gunicorn's
master and every worker read the same settings the same way. A bad value is a `ConfigError`
that names the variable and what it accepts, and never echoes a token.
"""

import base64
import binascii
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

DEFAULT_MAX_BODY_BYTES = 65536
#: gunicorn's own default for `forwarded_allow_ips`: the proxies trusted, unless configured.
DEFAULT_FORWARDED_ALLOW_IPS = ("127.0.0.1", "::1")
#: The URL of the memory store, `PLANTSTORE_STORE`'s default.
MEMORY_URL = "memory://"
DEFAULT_STORE = MEMORY_URL
#: Threads in each gunicorn worker of a shared store, as gunicorn.conf.py runs it unless told
#: otherwise: enough for its batches to grow with the load (all but one may wait on a batch).
DEFAULT_THREADS = 32
#: Threads in the memory store's worker, unless told otherwise: its requests only compute, so
#: more threads than the one core it runs on only hand the GIL round and lengthen the tail;
#: with four, one may hold a follower's long poll while three serve.
MEMORY_THREADS = 4
#: Seconds a start waits for its store to be reached, unless configured.
DEFAULT_STORE_WAIT = 10
#: Seconds the feed keeps an event, unless configured: a week.
DEFAULT_EVENTS_RETENTION = 7 * 86400

#: Seconds one webhook delivery attempt may take, connecting and answering, unless configured.
DEFAULT_WEBHOOK_TIMEOUT = 5
#: Seconds after an event's creation after which a failing delivery is given up: a day.
DEFAULT_WEBHOOK_GIVE_UP_AFTER = 86400
#: Each number's default, least and greatest value: docs/configuration.md says why each.
NUMBERS = {
    "PLANTSTORE_MAX_BODY_BYTES": (DEFAULT_MAX_BODY_BYTES, 1, 16 * 1024 * 1024),
    "PLANTSTORE_STORE_WAIT": (DEFAULT_STORE_WAIT, 0, 3600),
    "PLANTSTORE_WEBHOOK_TIMEOUT": (DEFAULT_WEBHOOK_TIMEOUT, 1, 300),
    "PLANTSTORE_WEBHOOK_GIVE_UP_AFTER": (DEFAULT_WEBHOOK_GIVE_UP_AFTER, 0, 30 * 86400),
    "PLANTSTORE_EVENTS_RETENTION": (DEFAULT_EVENTS_RETENTION, 60, 366 * 86400),
}
#: How the Standard Webhooks specification writes a secret: this prefix, then base64.
WEBHOOK_SECRET_PREFIX = "whsec_"
LOG_FORMATS = ("text", "json")
STORE_FORMS = "memory://, sqlite:///relative/path, sqlite:////absolute/path or postgresql://..."
#: An origin as a browser writes it in `Origin`: lower case, no path, no default port.
_ORIGIN = re.compile(
    r"(?P<scheme>[a-z][a-z0-9+.-]*)://(\[[0-9a-f:.]+\]|[a-z0-9-]+(\.[a-z0-9-]+)*)"
    r"(:(?P<port>[1-9][0-9]{0,4}))?"
)
_DEFAULT_PORTS = {"http": "80", "https": "443"}
#: What a bearer token may be, as a regular expression (`TOKEN_RULE` in words): the service's
#: `Authorization` pattern (plantstore/api/auth.py) and the nginx site's rate key
#: (deploy/nginx.conf) take exactly these tokens, so a longer one is refused at the start
#: rather than never let in.
TOKEN_PATTERN = r"[\x21-\x7e]{1,128}"
TOKEN_RULE = "1 to 128 printable ASCII characters without spaces"


def store_kind(url: str) -> str | None:
    """Name the store a `PLANTSTORE_STORE` URL chooses (memory, sqlite, postgresql), or None."""
    if url == MEMORY_URL:
        return "memory"
    if url.startswith("sqlite:///") and url.removeprefix("sqlite:///") not in ("", "/", ":memory:"):
        return "sqlite"
    if url.startswith(("postgresql://", "postgres://")):
        return "postgresql"
    return None


def feed_waits_for(threads: int) -> int:
    """Requests of a worker of `threads` that may wait for the feed's next event at once
    (`GET /events?wait=`): a quarter of them, one at least, so that waits never starve it."""
    return max(1, threads // 4)


class ConfigError(ValueError):
    """A setting in the environment has a value the service cannot use."""


def env_int(
    environ: Mapping[str, str],
    name: str,
    default: int,
    minimum: int = 0,
    maximum: int | None = None,
    blank_ok: bool = True,
) -> int:
    """Read a whole number from `minimum` to `maximum` from `environ[name]`, or give `default`.

    Unset or blank gives `default`; with `blank_ok` false, only unset does: gunicorn reads
    `PORT` and `WEB_CONCURRENCY` itself whenever they are set, and fails on a blank one.
    """
    raw = environ.get(name)
    if raw is None or (blank_ok and not raw.strip()):
        return default
    accepted = f"of at least {minimum}" if maximum is None else f"from {minimum} to {maximum}"
    try:
        value = int(raw)
    except ValueError:
        value = None
    if value is None or value < minimum or (maximum is not None and value > maximum):
        raise ConfigError(f"{name} must be a whole number {accepted}, not {raw.strip()!r}")
    return value


def is_token(text: str) -> bool:
    """Whether `text` can be a bearer token: `TOKEN_RULE`, as `TOKEN_PATTERN` writes it."""
    return re.fullmatch(TOKEN_PATTERN, text) is not None


def _read_tokens(environ: Mapping[str, str]) -> frozenset[str]:
    """The tokens `PLANTSTORE_TOKENS` lists, comma-separated."""
    tokens = [token.strip() for token in environ.get("PLANTSTORE_TOKENS", "").split(",")]
    tokens = [token for token in tokens if token]
    if not all(map(is_token, tokens)):
        raise ConfigError(
            f"PLANTSTORE_TOKENS must list tokens of {TOKEN_RULE}, separated by commas"
        )
    return frozenset(tokens)


def _read_store(environ: Mapping[str, str]) -> str:
    """Check the form of `PLANTSTORE_STORE`; `plantstore.stores.open_store` opens it.

    A refused value is not echoed: a mistyped PostgreSQL URL may hold a password.
    """
    url = environ.get("PLANTSTORE_STORE", "").strip() or DEFAULT_STORE
    kind = store_kind(url)
    if kind == "postgresql":
        _check_postgresql_url(url)
    if kind == "sqlite":
        directory = Path(url.removeprefix("sqlite:///")).parent
        if not directory.is_dir():
            raise ConfigError(
                f"PLANTSTORE_STORE names a SQLite file in {directory}, which is not a directory: "
                "make it first"
            )
    if kind:
        return url
    raise ConfigError(f"PLANTSTORE_STORE must be {STORE_FORMS}")


def _check_postgresql_url(url: str) -> None:
    """Refuse a URL libpq cannot read, or reads with a password's rest (after a `@` or `/` in
    it) as the host, port or database it names; quoting none of it, as libpq's words would."""
    try:
        import psycopg
        import psycopg_pool  # noqa: F401
    except ImportError:
        raise ConfigError(
            "PLANTSTORE_STORE names PostgreSQL, which needs psycopg: from the project's "
            "root, pip install '.[postgres]', or pip install 'psycopg[binary,pool]>=3.2'"
        ) from None
    base = url.partition("?")[0]
    unreadable = []
    for text in (base, url):
        try:
            psycopg.conninfo.conninfo_to_dict(text)
        except psycopg.Error:
            unreadable.append(text)
    if re.search(r"%(?![0-9A-Fa-f]{2})|%00", url):
        problem = "has a % that is not % and two hex digits (or is %00): write % as %25"
    elif base in unreadable:
        problem = "is not a URL that libpq can read: postgresql://user:password@host:port/dbname"
    elif unreadable:
        problem = "has a query parameter that libpq does not know, or not as parameter=value"
    elif re.match(r"[^@/]*[@/][^?]*@", url.partition("://")[2]):  # a password ends at @ or /
        problem = "has a @ or / in its user or password: write @ as %40 and / as %2F"
    else:
        return
    raise ConfigError(f"PLANTSTORE_STORE {problem}")


def _read_cors_origins(environ: Mapping[str, str]) -> tuple[str, ...]:
    """Origins whose pages may call the service from a browser; `*` alone is any origin.

    Falcon compares an origin as text, so one not written as a browser sends it (`Origin`:
    `https://shop.example`, never `HTTPS://Shop.example/` or `https://shop.example:443`) would
    match no request: it stops the start instead of leaving the page blocked without a word.
    """
    raw = environ.get("PLANTSTORE_CORS_ORIGINS", "")
    origins = tuple(entry.strip() for entry in raw.split(",") if entry.strip())
    if origins == ("*",):
        return origins
    for origin in origins:
        match = _ORIGIN.fullmatch(origin)
        port = match["port"] if match else None
        if not match or (
            port and (int(port) > 65535 or port == _DEFAULT_PORTS.get(match["scheme"]))
        ):
            raise ConfigError(
                "PLANTSTORE_CORS_ORIGINS must list origins as a browser sends them, "
                "scheme://host[:port] in lower case without a path or the default port "
                f"(https://shop.example), or be * alone; not {origin!r}"
            )
    return origins


def _read_webhook_urls(environ: Mapping[str, str]) -> tuple[str, ...]:
    """The subscribers' URLs, each http or https with a host.

    A refused URL is named by its place in the list, not echoed: it may hold credentials.
    """
    raw = environ.get("PLANTSTORE_WEBHOOK_URLS", "")
    urls = tuple(entry.strip() for entry in raw.split(",") if entry.strip())
    for number, url in enumerate(urls, start=1):
        try:
            parts = urlsplit(url)
            valid = parts.scheme in ("http", "https") and bool(parts.hostname) and parts.port != 0
        except ValueError:
            valid = False
        if not valid:
            raise ConfigError(
                "PLANTSTORE_WEBHOOK_URLS must list http:// or https:// URLs with a host, "
                f"separated by commas: URL {number} is not one"
            )
    return urls


def _read_webhook_secret(environ: Mapping[str, str], urls: tuple[str, ...]) -> str | None:
    """The secret events are signed with: `whsec_` and base64, as Standard Webhooks writes it.

    Required when URLs are set, and checked whenever given; never echoed.
    """
    secret = environ.get("PLANTSTORE_WEBHOOK_SECRET", "").strip()
    if not secret:
        if urls:
            raise ConfigError(
                "PLANTSTORE_WEBHOOK_SECRET must be set when PLANTSTORE_WEBHOOK_URLS is: "
                "whsec_ followed by a base64 key"
            )
        return None
    try:
        key = base64.b64decode(secret.removeprefix(WEBHOOK_SECRET_PREFIX), validate=True)
    except binascii.Error:
        key = b""
    if not secret.startswith(WEBHOOK_SECRET_PREFIX) or not key:
        raise ConfigError(
            "PLANTSTORE_WEBHOOK_SECRET must be whsec_ followed by a non-empty base64 key "
            "(the Standard Webhooks form)"
        )
    return secret


def _read_log_format(environ: Mapping[str, str]) -> str:
    """`text` for people reading the logs, `json` (one object a line) for log collectors."""
    raw = environ.get("PLANTSTORE_LOG_FORMAT", "").strip() or LOG_FORMATS[0]
    if raw not in LOG_FORMATS:
        raise ConfigError(f"PLANTSTORE_LOG_FORMAT must be text or json, not {raw!r}")
    return raw


def _read_flag(environ: Mapping[str, str], name: str) -> bool:
    """A yes/no setting: `1` or `0`, off when unset, so a typo cannot turn it on."""
    raw = environ.get(name, "").strip()
    if raw not in ("", "0", "1"):
        raise ConfigError(f"{name} must be 1 or 0, not {raw!r}")
    return raw == "1"


@dataclass(frozen=True)
class Config:
    """What the service needs to know; tests build one directly instead of using `from_env`.

    gunicorn's own settings (workers, threads, timeouts, `FORWARDED_ALLOW_IPS`) are gunicorn's:
    a worker puts what the app needs of them here (`forwarded_allow_ips`).
    """

    #: The tokens listed in `PLANTSTORE_TOKENS`, accepted for as long as the process runs.
    tokens: frozenset[str]
    #: `PLANTSTORE_TOKENS_FILE`: its tokens are accepted too, as the file reads now.
    tokens_file: str | None = None
    #: Where the run's processes keep the file's last good tokens, for a worker that finds it
    #: bad: a directory gunicorn's master makes, which each worker puts here; None keeps none.
    tokens_kept_in: str | None = None
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    #: The proxies whose forwarded headers gunicorn trusts, as its setting lists them.
    forwarded_allow_ips: tuple[str, ...] = DEFAULT_FORWARDED_ALLOW_IPS
    store_url: str = DEFAULT_STORE
    #: Seconds a start (or `plantstore check`) waits for the store before it gives up.
    store_wait: int = DEFAULT_STORE_WAIT
    cors_origins: tuple[str, ...] = ()
    metrics_public: bool = False
    #: Where events are sent; none, the default, sends none and runs no delivery thread.
    webhook_urls: tuple[str, ...] = ()
    #: Left out of the repr, so that a config in a log or a traceback does not show it.
    webhook_secret: str | None = field(default=None, repr=False)
    webhook_timeout: int = DEFAULT_WEBHOOK_TIMEOUT
    webhook_give_up_after: int = DEFAULT_WEBHOOK_GIVE_UP_AFTER
    log_format: str = LOG_FORMATS[0]
    events_retention: int = DEFAULT_EVENTS_RETENTION
    #: Requests that may wait for an event at once, in each worker (a quarter of its threads).
    feed_waits: int = feed_waits_for(DEFAULT_THREADS)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] = os.environ) -> "Config":
        webhook_urls = _read_webhook_urls(environ)
        number = {name: env_int(environ, name, *bounds) for name, bounds in NUMBERS.items()}
        return cls(
            tokens=_read_tokens(environ),
            tokens_file=environ.get("PLANTSTORE_TOKENS_FILE") or None,
            max_body_bytes=number["PLANTSTORE_MAX_BODY_BYTES"],
            store_url=_read_store(environ),
            store_wait=number["PLANTSTORE_STORE_WAIT"],
            cors_origins=_read_cors_origins(environ),
            metrics_public=_read_flag(environ, "PLANTSTORE_METRICS_PUBLIC"),
            webhook_urls=webhook_urls,
            webhook_secret=_read_webhook_secret(environ, webhook_urls),
            webhook_timeout=number["PLANTSTORE_WEBHOOK_TIMEOUT"],
            webhook_give_up_after=number["PLANTSTORE_WEBHOOK_GIVE_UP_AFTER"],
            log_format=_read_log_format(environ),
            events_retention=number["PLANTSTORE_EVENTS_RETENTION"],
        )

    @property
    def memory(self) -> bool:
        """Whether plants are kept in the process's memory, which one worker process alone sees."""
        return self.store_url == DEFAULT_STORE
