"""Each variable read from the environment and checked: a bad value is a `ConfigError` that
names the variable and what it accepts, and never echoes a token, a password or a secret."""

import base64
import binascii
import re
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import urlsplit

from plantstore.config.defaults import DEFAULT_STORE, LOG_FORMATS
from plantstore.config.forms import (
    STORE_FORMS,
    TOKEN_RULE,
    WEBHOOK_SECRET_PREFIX,
    is_token,
    store_kind,
)

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


def read_tokens(environ: Mapping[str, str]) -> frozenset[str]:
    """The tokens `PLANTSTORE_TOKENS` lists, comma-separated."""
    tokens = [token.strip() for token in environ.get("PLANTSTORE_TOKENS", "").split(",")]
    tokens = [token for token in tokens if token]
    if not all(map(is_token, tokens)):
        raise ConfigError(
            f"PLANTSTORE_TOKENS must list tokens of {TOKEN_RULE}, separated by commas"
        )
    return frozenset(tokens)


def read_store(environ: Mapping[str, str]) -> str:
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


def read_cors_origins(environ: Mapping[str, str]) -> tuple[str, ...]:
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


def read_webhook_urls(environ: Mapping[str, str]) -> tuple[str, ...]:
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


def read_webhook_secret(environ: Mapping[str, str], urls: tuple[str, ...]) -> str | None:
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


def read_log_format(environ: Mapping[str, str]) -> str:
    """`text` for people reading the logs, `json` (one object a line) for log collectors."""
    raw = environ.get("PLANTSTORE_LOG_FORMAT", "").strip() or LOG_FORMATS[0]
    if raw not in LOG_FORMATS:
        raise ConfigError(f"PLANTSTORE_LOG_FORMAT must be text or json, not {raw!r}")
    return raw


def read_flag(environ: Mapping[str, str], name: str) -> bool:
    """A yes/no setting: `1` or `0`, off when unset, so a typo cannot turn it on."""
    raw = environ.get(name, "").strip()
    if raw not in ("", "0", "1"):
        raise ConfigError(f"{name} must be 1 or 0, not {raw!r}")
    return raw == "1"
