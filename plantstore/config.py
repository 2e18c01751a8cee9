"""Configuration, read from the environment in one place."""

import ipaddress
import os
import secrets
import sys
from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass
from pathlib import Path

from plantstore.stores import store_kind

DEFAULT_MAX_BODY_BYTES = 65536
DEFAULT_FORWARDED_ALLOW_IPS = "127.0.0.1,::1"
DEFAULT_STORE = "memory://"
STORE_FORMS = "memory://, sqlite:///relative/path, sqlite:////absolute/path or postgresql://..."


class ConfigError(ValueError):
    """A setting in the environment has a value the service cannot use."""


def env_int(environ: Mapping[str, str], name: str, default: int, minimum: int = 0) -> int:
    """Read a whole number of at least `minimum` from `environ[name]`, or give `default`."""
    raw = environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ConfigError(f"{name} must be a whole number, not {raw!r}") from None
    if value < minimum:
        raise ConfigError(f"{name} must be at least {minimum}, not {value}")
    return value


def ensure_token(environ: MutableMapping[str, str] = os.environ) -> None:
    """Make and announce a random token when none is configured, so the service never runs open.

    It is put into `environ`, so that processes forked afterwards (gunicorn's workers, when this
    runs in the master) all accept the same token.
    """
    if environ.get("PLANTSTORE_TOKENS", "").strip() or environ.get("PLANTSTORE_TOKENS_FILE"):
        return
    token = secrets.token_urlsafe(32)
    environ["PLANTSTORE_TOKENS"] = token
    print(
        f"plantstore: no token configured; this run accepts: Authorization: Bearer {token}\n"
        "plantstore: set PLANTSTORE_TOKENS (comma-separated) or PLANTSTORE_TOKENS_FILE "
        "(one a line) to choose your own.",
        file=sys.stderr,
        flush=True,
    )


def _read_tokens(environ: Mapping[str, str]) -> frozenset[str]:
    tokens = environ.get("PLANTSTORE_TOKENS", "").split(",")
    path = environ.get("PLANTSTORE_TOKENS_FILE")
    if path:
        try:
            tokens += Path(path).read_text(encoding="utf-8").splitlines()
        except OSError as ex:
            raise ConfigError(f"PLANTSTORE_TOKENS_FILE cannot be read: {ex.strerror}") from None
    accepted = frozenset(token.strip() for token in tokens if token.strip())
    if not accepted:
        raise ConfigError("PLANTSTORE_TOKENS and PLANTSTORE_TOKENS_FILE name no token")
    if any(not (token.isascii() and token.isprintable()) or " " in token for token in accepted):
        raise ConfigError("tokens must be printable ASCII without spaces")
    return accepted


def _read_forwarded_allow_ips(environ: Mapping[str, str]) -> tuple[str, ...]:
    """Addresses or networks of trusted proxies, as gunicorn reads them; `*` is everyone."""
    raw = environ.get("FORWARDED_ALLOW_IPS", DEFAULT_FORWARDED_ALLOW_IPS)
    allowed = tuple(entry.strip() for entry in raw.split(",") if entry.strip())
    for entry in allowed:
        if entry != "*":
            try:
                ipaddress.ip_network(entry)
            except ValueError:
                raise ConfigError(
                    f"FORWARDED_ALLOW_IPS must list addresses or networks, not {entry!r}"
                ) from None
    return allowed


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
                "PLANTSTORE_STORE names PostgreSQL, which needs psycopg: "
                "pip install 'plantstore[postgres]'"
            ) from None
    if kind:
        return url
    raise ConfigError(f"PLANTSTORE_STORE must be {STORE_FORMS}")


def _read_flag(environ: Mapping[str, str], name: str) -> bool:
    """A yes/no setting: `1` or `0`, off when unset, so a typo cannot turn it on."""
    raw = environ.get(name, "").strip()
    if raw not in ("", "0", "1"):
        raise ConfigError(f"{name} must be 1 or 0, not {raw!r}")
    return raw == "1"


@dataclass(frozen=True)
class Config:
    """What the app needs to know; tests build one directly instead of using `from_env`."""

    tokens: frozenset[str]
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    forwarded_allow_ips: tuple[str, ...] = tuple(DEFAULT_FORWARDED_ALLOW_IPS.split(","))
    store_url: str = DEFAULT_STORE
    metrics_public: bool = False

    @classmethod
    def from_env(cls, environ: MutableMapping[str, str] = os.environ) -> "Config":
        ensure_token(environ)
        return cls(
            tokens=_read_tokens(environ),
            max_body_bytes=env_int(
                environ, "PLANTSTORE_MAX_BODY_BYTES", DEFAULT_MAX_BODY_BYTES, minimum=1
            ),
            forwarded_allow_ips=_read_forwarded_allow_ips(environ),
            store_url=_read_store(environ),
            metrics_public=_read_flag(environ, "PLANTSTORE_METRICS_PUBLIC"),
        )
