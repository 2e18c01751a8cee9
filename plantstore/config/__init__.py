"""Configuration, read from the environment in one place: `Config`, made by `Config.from_env`.

Reading has no side effects: it neither changes the environment nor prints, so gunicorn's
master and every worker read the same settings the same way. Each setting's default and
bounds are in `defaults`, what a value may look like in `forms`, and the reading of each
variable in `variables`; the rest of the package imports their names from here. This part is
the package's bottom: it imports nothing else of it.
"""

import os
from collections.abc import Mapping
from dataclasses import dataclass, field

from plantstore.config.defaults import (
    DEFAULT_EVENTS_RETENTION,
    DEFAULT_FORWARDED_ALLOW_IPS,
    DEFAULT_MAX_BODY_BYTES,
    DEFAULT_STORE,
    DEFAULT_STORE_WAIT,
    DEFAULT_THREADS,
    DEFAULT_WEBHOOK_GIVE_UP_AFTER,
    DEFAULT_WEBHOOK_TIMEOUT,
    LOG_FORMATS,
    MEMORY_THREADS,
    MEMORY_URL,
    NUMBERS,
    feed_waits_for,
)
from plantstore.config.forms import (
    STORE_FORMS,
    TOKEN_PATTERN,
    TOKEN_RULE,
    WEBHOOK_SECRET_PREFIX,
    is_token,
    store_kind,
)
from plantstore.config.variables import (
    ConfigError,
    env_int,
    read_cors_origins,
    read_flag,
    read_log_format,
    read_store,
    read_tokens,
    read_webhook_secret,
    read_webhook_urls,
)

__all__ = [
    "DEFAULT_EVENTS_RETENTION",
    "DEFAULT_FORWARDED_ALLOW_IPS",
    "DEFAULT_MAX_BODY_BYTES",
    "DEFAULT_STORE",
    "DEFAULT_STORE_WAIT",
    "DEFAULT_THREADS",
    "DEFAULT_WEBHOOK_GIVE_UP_AFTER",
    "DEFAULT_WEBHOOK_TIMEOUT",
    "LOG_FORMATS",
    "MEMORY_THREADS",
    "MEMORY_URL",
    "NUMBERS",
    "STORE_FORMS",
    "TOKEN_PATTERN",
    "TOKEN_RULE",
    "WEBHOOK_SECRET_PREFIX",
    "Config",
    "ConfigError",
    "env_int",
    "feed_waits_for",
    "is_token",
    "store_kind",
]


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
        webhook_urls = read_webhook_urls(environ)
        number = {name: env_int(environ, name, *bounds) for name, bounds in NUMBERS.items()}
        return cls(
            tokens=read_tokens(environ),
            tokens_file=environ.get("PLANTSTORE_TOKENS_FILE") or None,
            max_body_bytes=number["PLANTSTORE_MAX_BODY_BYTES"],
            store_url=read_store(environ),
            store_wait=number["PLANTSTORE_STORE_WAIT"],
            cors_origins=read_cors_origins(environ),
            metrics_public=read_flag(environ, "PLANTSTORE_METRICS_PUBLIC"),
            webhook_urls=webhook_urls,
            webhook_secret=read_webhook_secret(environ, webhook_urls),
            webhook_timeout=number["PLANTSTORE_WEBHOOK_TIMEOUT"],
            webhook_give_up_after=number["PLANTSTORE_WEBHOOK_GIVE_UP_AFTER"],
            log_format=read_log_format(environ),
            events_retention=number["PLANTSTORE_EVENTS_RETENTION"],
        )

    @property
    def memory(self) -> bool:
        """Whether plants are kept in the process's memory, which one worker process alone sees."""
        return self.store_url == DEFAULT_STORE
