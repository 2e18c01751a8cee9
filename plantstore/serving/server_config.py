"""The server's settings from the environment, beside the app's `Config`, and both read at once."""

import os
from collections.abc import Mapping
from dataclasses import dataclass

from plantstore.config import Config, ConfigError, env_int

LOG_FORMATS = ("text", "json")
#: The longest request line and the most header fields gunicorn honours: it silently takes a
#: larger setting as these (`gunicorn.http.message.MAX_REQUEST_LINE`, `MAX_HEADERS`).
MAX_REQUEST_LINE = 8190
MAX_REQUEST_FIELDS = 32768


def check_port(environ: Mapping[str, str]) -> None:
    """Check `PORT`, which gunicorn binds as `0.0.0.0:$PORT` whenever it is set, even empty."""
    env_int(environ, "PORT", 0, minimum=1, maximum=65535, blank_ok=False)


@dataclass(frozen=True)
class ServerConfig:
    """What gunicorn's settings need from the environment, beyond the app's `Config`.

    `plantstore serve` reads it before gunicorn is imported: gunicorn reads `WEB_CONCURRENCY`
    and `FORWARDED_ALLOW_IPS` itself when it loads, and would refuse a bad one in its own
    words (or a traceback) before any settings file runs.
    """

    workers: int
    limit_request_line: int
    limit_request_fields: int
    limit_request_field_size: int
    timeout: int
    graceful_timeout: int
    keepalive: int
    log_format: str

    @classmethod
    def from_env(cls, environ: Mapping[str, str], config: Config) -> "ServerConfig":
        """Read the server's settings; `config` (the app's) decides the default worker count.

        With a shared store (SQLite, PostgreSQL), one worker process per core, so Python runs
        on every core; with the memory store one, since a dict cannot be shared between them.
        """
        check_port(environ)
        return cls(
            workers=env_int(
                environ,
                "WEB_CONCURRENCY",
                1 if config.memory else os.cpu_count() or 1,
                minimum=1,
                blank_ok=False,
            ),
            # gunicorn takes a request line limit of 0 as none; 0 fields or a field size of 0
            # as its largest number of fields and 8190 bytes, whatever its documentation says.
            limit_request_line=env_int(
                environ, "GUNICORN_LIMIT_REQUEST_LINE", 4094, maximum=MAX_REQUEST_LINE
            ),
            limit_request_fields=env_int(
                environ, "GUNICORN_LIMIT_REQUEST_FIELDS", 100, 1, MAX_REQUEST_FIELDS
            ),
            limit_request_field_size=env_int(environ, "GUNICORN_LIMIT_REQUEST_FIELD_SIZE", 8190, 1),
            timeout=env_int(environ, "GUNICORN_TIMEOUT", 30, 1),
            graceful_timeout=env_int(environ, "GUNICORN_GRACEFUL_TIMEOUT", 30),
            keepalive=env_int(environ, "GUNICORN_KEEPALIVE", 5),
            log_format=_read_log_format(environ),
        )


def _read_log_format(environ: Mapping[str, str]) -> str:
    """`text` for people reading the logs, `json` (one object a line) for log collectors."""
    raw = environ.get("PLANTSTORE_LOG_FORMAT", "").strip() or LOG_FORMATS[0]
    if raw not in LOG_FORMATS:
        raise ConfigError(f"PLANTSTORE_LOG_FORMAT must be text or json, not {raw!r}")
    return raw


def check_workers(config: Config, workers: int) -> None:
    """Refuse more than one worker process for the memory store: each would keep its own dict."""
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


def read_all(environ: Mapping[str, str] = os.environ) -> tuple[Config, ServerConfig]:
    """Every setting of the service, the app's and the server's: a bad one is a `ConfigError`."""
    config = Config.from_env(environ)
    return config, ServerConfig.from_env(environ, config)
