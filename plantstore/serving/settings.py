"""The service's settings as a start checks them: the environment's, and what it names.

`Config.from_env` reads the variables; a start (gunicorn's master, or `plantstore check`) also
reads the tokens file and tells the webhook subscribers apart, so that a bad one stops it with
one line, and gunicorn's master warns of a tokens file that exposes tokens. A worker reads the
environment alone: one started while the tokens file is bad still serves, with the run's last
good tokens (`plantstore.tokens.accepted.Tokens`).
"""

import ipaddress
import os
import stat
from collections.abc import Mapping

from plantstore.config import Config, ConfigError, env_int
from plantstore.core.events import subscriber_key
from plantstore.tokens.file import read_tokens_file


def read_settings(environ: Mapping[str, str] = os.environ) -> Config:
    """Every setting of the service, as a start must find them: a bad one is a `ConfigError`."""
    config = Config.from_env(environ)
    from_file = read_tokens_file(config.tokens_file) if config.tokens_file else ()
    # With neither variable set there is no token, and the master makes one for the run.
    named = environ.get("PLANTSTORE_TOKENS", "").strip() or config.tokens_file
    if named and not (config.tokens or from_file):
        raise ConfigError("PLANTSTORE_TOKENS and PLANTSTORE_TOKENS_FILE name no token")
    _check_subscribers(config.webhook_urls)
    return config


def exposed_tokens_warning(config: Config) -> str | None:
    """Say when the tokens file holds tokens themselves (not their digests) and every user of
    the machine may read it, and so send them; None otherwise. Never a token."""
    path = config.tokens_file
    try:
        exposed = bool(path) and bool(os.stat(path).st_mode & stat.S_IROTH)
        plain = exposed and any(entry.plain for entry in read_tokens_file(path))
    except (OSError, ConfigError):
        return None
    if not plain:
        return None
    return (
        f"PLANTSTORE_TOKENS_FILE: {path} holds tokens in plain text and every user may read "
        "it: keep their digests instead (the lines plantstore token prints), or chmod o-r "
        f"{path}"
    )


def _check_subscribers(urls: tuple[str, ...]) -> None:
    """Refuse two URLs that differ at most in their user and password: they name one subscriber
    (one `subscriber_key`), whose events would go twice, either way."""
    keys = [subscriber_key(url) for url in urls]
    for number, key in enumerate(keys, start=1):
        if (first := keys.index(key) + 1) < number:
            raise ConfigError(
                f"PLANTSTORE_WEBHOOK_URLS must list each subscriber once: URL {number} is URL "
                f"{first} again (if only with another user or password)"
            )


def check_gunicorns_variables(environ: Mapping[str, str] = os.environ) -> None:
    """Refuse a bad `PORT`, `WEB_CONCURRENCY` or `FORWARDED_ALLOW_IPS`, naming it.

    gunicorn reads them itself as it loads, and refuses a bad one in words that do not name it,
    or with a traceback (a `WEB_CONCURRENCY` that is not a number, a `PORT` over 65535 once it
    binds); so `plantstore serve` checks them first, as gunicorn's validators would take them.
    """
    env_int(environ, "PORT", 0, 1, 65535, blank_ok=False)
    env_int(environ, "WEB_CONCURRENCY", 1, 1, blank_ok=False)
    raw = environ.get("FORWARDED_ALLOW_IPS", "").strip()
    for entry in (part.strip() for part in raw.split(",") if part):
        try:
            if entry != "*":
                ipaddress.ip_network(entry)
        except ValueError:
            raise ConfigError(
                "FORWARDED_ALLOW_IPS must list IP addresses or networks (10.0.0.0/8, without "
                f"host bits), separated by commas, or *: not {entry!r}"
            ) from None


def check_workers(config: Config, workers: int) -> None:
    """Refuse no worker at all (gunicorn would serve nothing, for ever), and more than one
    worker process for the memory store: each would keep its own dict."""
    if workers < 1:
        raise ConfigError(f"gunicorn's workers must be at least 1, not {workers}")
    if config.memory and workers > 1:
        raise ConfigError(
            "the memory store keeps plants in one process; run one worker "
            f"(WEB_CONCURRENCY=1), not {workers}"
        )


def unreachable(config: Config, ex: Exception) -> str:
    """Say that the store a start names could not serve within its wait, and why."""
    return (
        f"PLANTSTORE_STORE could not be reached within {config.store_wait} s "
        f"(PLANTSTORE_STORE_WAIT): {ex}"
    )


def waiting(config: Config, ex: Exception) -> str:
    """Say, once, that a start waits for the store it names, why, and for how long at most."""
    return (
        f"plantstore: waiting up to {config.store_wait} s (PLANTSTORE_STORE_WAIT) for "
        f"PLANTSTORE_STORE, which cannot be reached yet: {ex}"
    )
