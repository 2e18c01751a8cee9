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

from plantstore.serving.proxy import TrustedProxies
from plantstore.stores import MEMORY_URL, store_kind
from plantstore.webhooks.subscribers import subscriber_key

DEFAULT_MAX_BODY_BYTES = 65536
DEFAULT_FORWARDED_ALLOW_IPS = "127.0.0.1,::1"
DEFAULT_TRUSTED_PROXIES = TrustedProxies.parse(DEFAULT_FORWARDED_ALLOW_IPS)
DEFAULT_STORE = MEMORY_URL
#: Seconds a start waits for its store to be reached, unless configured.
DEFAULT_STORE_WAIT = 10
#: Threads in each gunicorn worker, unless configured.
DEFAULT_THREADS = 8
#: Seconds one webhook delivery attempt may take, connecting and answering, unless configured.
DEFAULT_WEBHOOK_TIMEOUT = 5
#: Seconds after an event's creation after which a failing delivery is given up: a day.
DEFAULT_WEBHOOK_GIVE_UP_AFTER = 86400
#: How the Standard Webhooks specification writes a secret: this prefix, then base64.
WEBHOOK_SECRET_PREFIX = "whsec_"
STORE_FORMS = "memory://, sqlite:///relative/path, sqlite:////absolute/path or postgresql://..."
#: An origin as a browser writes it in `Origin`: lower case, no path, no default port.
_ORIGIN = re.compile(
    r"(?P<scheme>[a-z][a-z0-9+.-]*)://(\[[0-9a-f:.]+\]|[a-z0-9-]+(\.[a-z0-9-]+)*)"
    r"(:(?P<port>[1-9][0-9]{0,4}))?"
)
_DEFAULT_PORTS = {"http": "80", "https": "443"}


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


def _is_token(text: str) -> bool:
    return text.isascii() and text.isprintable() and " " not in text


def _read_tokens(environ: Mapping[str, str]) -> tuple[frozenset[str], str | None]:
    """The tokens `PLANTSTORE_TOKENS` lists, and the path `PLANTSTORE_TOKENS_FILE` names.

    The file is read here too, so that a start with a bad one stops; each worker reads it
    again, and again whenever it changes (`plantstore.api.auth.Tokens`). With neither variable
    set there is no token (gunicorn's master then makes one); else they must name one at least.
    """
    listed = environ.get("PLANTSTORE_TOKENS", "")
    tokens = [token.strip() for token in listed.split(",")]
    tokens = [token for token in tokens if token]
    if not all(map(_is_token, tokens)):
        raise ConfigError(
            "PLANTSTORE_TOKENS must list tokens of printable ASCII without spaces, "
            "separated by commas"
        )
    path = environ.get("PLANTSTORE_TOKENS_FILE") or None
    if path is None and not listed.strip():
        return frozenset(), None
    from_file = read_tokens_file(path) if path else frozenset()
    if not tokens and not from_file:
        raise ConfigError("PLANTSTORE_TOKENS and PLANTSTORE_TOKENS_FILE name no token")
    return frozenset(tokens), path


def read_tokens_file(path: str) -> frozenset[str]:
    """The tokens in the file at `path`: one a line, blank lines and `#` comments skipped.

    A bad file is a `ConfigError` naming the file, and the line of a refused token, never the
    token itself.
    """
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except OSError as ex:
        raise ConfigError(f"PLANTSTORE_TOKENS_FILE cannot be read: {path}: {ex.strerror}") from None
    except UnicodeDecodeError:
        raise ConfigError(
            f"PLANTSTORE_TOKENS_FILE must be text, one token a line: {path} is not UTF-8"
        ) from None
    tokens = []
    for number, line in enumerate(lines, start=1):
        token = line.strip()
        if not token or token.startswith("#"):
            continue
        if not _is_token(token):
            raise ConfigError(
                f"PLANTSTORE_TOKENS_FILE must hold one token of printable ASCII without spaces "
                f"a line (or a # comment): {path}, line {number}, does not"
            )
        tokens.append(token)
    return frozenset(tokens)


def _read_forwarded_allow_ips(environ: Mapping[str, str]) -> TrustedProxies:
    """Addresses or networks of trusted proxies, as gunicorn reads them; `*` is everyone."""
    try:
        return TrustedProxies.parse(environ.get("FORWARDED_ALLOW_IPS", DEFAULT_FORWARDED_ALLOW_IPS))
    except ValueError as ex:
        raise ConfigError(
            f"FORWARDED_ALLOW_IPS must list addresses or networks, not {str(ex)!r}"
        ) from None


def _read_store(environ: Mapping[str, str]) -> str:
    """Check the form of `PLANTSTORE_STORE`; `plantstore.stores.open_store` opens it.

    A refused value is not echoed: a mistyped PostgreSQL URL may hold a password.
    """
    url = environ.get("PLANTSTORE_STORE", "").strip() or DEFAULT_STORE
    kind = store_kind(url)
    if kind == "postgresql":
        try:
            import psycopg_pool  # noqa: F401
        except ImportError:
            raise ConfigError(
                "PLANTSTORE_STORE names PostgreSQL, which needs psycopg: from the project's "
                "root, pip install '.[postgres]', or pip install 'psycopg[binary,pool]>=3.2'"
            ) from None
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
    """The subscribers' URLs, each http or https with a host, and each another subscriber.

    A refused URL is named by its place in the list, not echoed: it may hold credentials.
    Two URLs that differ at most in their user and password name one subscriber (one
    `subscriber_key`), whose events would go twice, either way.
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
    keys = [subscriber_key(url) for url in urls]
    for number, key in enumerate(keys, start=1):
        if (first := keys.index(key) + 1) < number:
            raise ConfigError(
                f"PLANTSTORE_WEBHOOK_URLS must list each subscriber once: URL {number} is URL "
                f"{first} again (if only with another user or password)"
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


def _read_flag(environ: Mapping[str, str], name: str) -> bool:
    """A yes/no setting: `1` or `0`, off when unset, so a typo cannot turn it on."""
    raw = environ.get(name, "").strip()
    if raw not in ("", "0", "1"):
        raise ConfigError(f"{name} must be 1 or 0, not {raw!r}")
    return raw == "1"


@dataclass(frozen=True)
class Config:
    """What the app needs to know; tests build one directly instead of using `from_env`."""

    #: The tokens listed in `PLANTSTORE_TOKENS`, accepted for as long as the process runs.
    tokens: frozenset[str]
    #: `PLANTSTORE_TOKENS_FILE`: its tokens are accepted too, as the file reads now.
    tokens_file: str | None = None
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    forwarded_allow_ips: TrustedProxies = DEFAULT_TRUSTED_PROXIES
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
    #: gunicorn's threads in each worker (`GUNICORN_THREADS`): a shared store may hold all but one.
    threads: int = DEFAULT_THREADS

    @classmethod
    def from_env(cls, environ: Mapping[str, str] = os.environ) -> "Config":
        webhook_urls = _read_webhook_urls(environ)
        tokens, tokens_file = _read_tokens(environ)
        return cls(
            tokens=tokens,
            tokens_file=tokens_file,
            max_body_bytes=env_int(
                environ, "PLANTSTORE_MAX_BODY_BYTES", DEFAULT_MAX_BODY_BYTES, minimum=1
            ),
            forwarded_allow_ips=_read_forwarded_allow_ips(environ),
            store_url=_read_store(environ),
            store_wait=env_int(environ, "PLANTSTORE_STORE_WAIT", DEFAULT_STORE_WAIT),
            cors_origins=_read_cors_origins(environ),
            metrics_public=_read_flag(environ, "PLANTSTORE_METRICS_PUBLIC"),
            webhook_urls=webhook_urls,
            webhook_secret=_read_webhook_secret(environ, webhook_urls),
            webhook_timeout=env_int(
                environ, "PLANTSTORE_WEBHOOK_TIMEOUT", DEFAULT_WEBHOOK_TIMEOUT, minimum=1
            ),
            webhook_give_up_after=env_int(
                environ, "PLANTSTORE_WEBHOOK_GIVE_UP_AFTER", DEFAULT_WEBHOOK_GIVE_UP_AFTER
            ),
            threads=env_int(environ, "GUNICORN_THREADS", DEFAULT_THREADS, 1),
        )

    @property
    def memory(self) -> bool:
        """Whether plants are kept in the process's memory, which one worker process alone sees."""
        return self.store_url == DEFAULT_STORE
