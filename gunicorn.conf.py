"""gunicorn settings for Plant Store: `gunicorn -c gunicorn.conf.py` from the project's root.

Every setting can be changed from the environment; a flag on the command line (`--bind`,
`--workers`, ...) overrides this file. The README's configuration table lists them all.
"""

import os

from plantstore.config import Config, ConfigError, env_int


def _int(name: str, default: int, minimum: int = 0) -> int:
    """Read a setting from the environment; a bad value stops the start with one clear line."""
    try:
        return env_int(os.environ, name, default, minimum)
    except ConfigError as ex:
        raise SystemExit(f"plantstore: {ex}") from None


# Read the configuration once here, in the master: a bad value stops the start with one clear
# line, and a token made up for want of one is made once and inherited by every worker.
try:
    CONFIG = Config.from_env()
except ConfigError as ex:
    raise SystemExit(f"plantstore: {ex}") from None

# The app factory, called in each worker after it forks.
wsgi_app = "plantstore.app:create_app()"

# bind is left to gunicorn: 127.0.0.1:8000, or 0.0.0.0:$PORT when PORT is set.

# One worker process: the memory store is a dict, which processes cannot share.
workers = _int("WEB_CONCURRENCY", 1, minimum=1)

# Concurrency comes from threads in that process (gthread worker).
worker_class = "gthread"
threads = _int("GUNICORN_THREADS", 8, minimum=1)

# Proxies trusted for X-Forwarded-Proto/-For and SCRIPT_NAME (loopback by default), as the app.
forwarded_allow_ips = ",".join(CONFIG.forwarded_allow_ips)

# Bounds on the request line and headers; a request over them is refused before the app.
limit_request_line = _int("GUNICORN_LIMIT_REQUEST_LINE", 4094)
limit_request_fields = _int("GUNICORN_LIMIT_REQUEST_FIELDS", 100)
limit_request_field_size = _int("GUNICORN_LIMIT_REQUEST_FIELD_SIZE", 8190)

# A worker silent this long is restarted (a heartbeat, not a per-request timeout).
timeout = _int("GUNICORN_TIMEOUT", 30, minimum=1)

# On SIGTERM, requests in flight get this long to finish.
graceful_timeout = _int("GUNICORN_GRACEFUL_TIMEOUT", 30)

# How long an idle keep-alive connection is held open.
keepalive = _int("GUNICORN_KEEPALIVE", 5)

# One access-log line per request on stdout; never with the Authorization header.
accesslog = "-"
access_log_format = (
    '%(h)s request_id=%({x-request-id}o)s "%(m)s %(U)s" status=%(s)s duration_us=%(D)s'
)

# gunicorn's control socket is one path per user: several servers on a machine would fight over
# it, and nothing here uses it.
control_socket_disable = True


def on_starting(server):
    """Refuse more than one worker: each would keep its own dict, and duplicates would slip."""
    if server.cfg.workers > 1:
        raise SystemExit(
            "plantstore: the memory store keeps plants in one process; run one worker "
            f"(WEB_CONCURRENCY=1), not {server.cfg.workers}"
        )
