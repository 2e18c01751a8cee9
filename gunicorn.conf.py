"""gunicorn settings for Plant Store: `gunicorn -c gunicorn.conf.py` from the project's root.

Every setting can be changed from the environment; a flag on the command line (`--bind`,
`--workers`, ...) overrides this file. The README's configuration table lists them all.
"""

import os
import shutil
import sys
import tempfile

from plantstore.config import DEFAULT_STORE, Config, ConfigError, env_int
from plantstore.stores import SchemaTooNew, StoreUnavailable, open_store


def _int(name: str, default: int, minimum: int = 0) -> int:
    """Read a setting from the environment; a bad value stops the start with one clear line."""
    try:
        return env_int(os.environ, name, default, minimum)
    except ConfigError as ex:
        raise SystemExit(f"plantstore: {ex}") from None


# Read the configuration once here, in the master: a bad value stops the start with one clear
# line, and a token made up for want of one is made once and inherited by every worker.
try:
    _config = Config.from_env()
except ConfigError as ex:
    raise SystemExit(f"plantstore: {ex}") from None
_MEMORY = _config.store_url == DEFAULT_STORE

# The app factory, called in each worker after it forks (the app is not preloaded), so each
# worker opens its own database connections.
wsgi_app = "plantstore.app:create_app()"

# bind is left to gunicorn: 127.0.0.1:8000, or 0.0.0.0:$PORT when PORT is set.

# With a shared store (SQLite, PostgreSQL), one worker process per core, so Python runs on
# every core; with the memory store one, since a dict cannot be shared between processes.
workers = _int("WEB_CONCURRENCY", 1 if _MEMORY else os.cpu_count() or 1, minimum=1)

# Each process serves requests on threads (gthread worker), which overlap waiting for I/O;
# requests gunicorn refuses itself are answered with the JSON Error body too.
worker_class = "plantstore.worker.JsonErrorThreadWorker"
threads = _int("GUNICORN_THREADS", 8, minimum=1)

# Proxies trusted for X-Forwarded-For/-Proto and SCRIPT_NAME, by gunicorn and the app alike.
forwarded_allow_ips = ",".join(_config.forwarded_allow_ips)

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
    """Check what would make every worker fail, before any starts.

    The memory store takes one worker: each would keep its own dict. A database store brings
    its schema up to date here, so that a database newer than this code stops the start with
    one line. One that cannot be reached now is left to the workers, which serve once it can.
    """
    if _MEMORY and server.cfg.workers > 1:
        raise SystemExit(
            "plantstore: the memory store keeps plants in one process; run one worker "
            f"(WEB_CONCURRENCY=1), not {server.cfg.workers}"
        )
    try:
        open_store(_config.store_url).close()
    except SchemaTooNew as ex:
        raise SystemExit(f"plantstore: {ex}") from None
    except StoreUnavailable:
        pass


# Metrics (plantstore/metrics.py): each worker keeps its counts in files of one directory, and a
# scrape adds up all of them. The master makes the directory once its sockets are bound, before
# the first fork, and names it in PROMETHEUS_MULTIPROC_DIR, which prometheus_client reads when it
# is first imported: the master must not import it before. A dead worker's counts stay; its
# live gauges (requests in flight) go. The directory goes when the master exits.


def when_ready(server):
    # With --preload (as the benchmark fills a memory store) the master has loaded the app, and
    # prometheus_client with it: each worker keeps its own counts, right only for a single one.
    if "prometheus_client" in sys.modules and server.cfg.workers > 1:
        raise SystemExit(
            "plantstore: with --preload each worker would count alone in /metrics; "
            "run one worker, or drop --preload"
        )
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = tempfile.mkdtemp(prefix="plantstore-metrics-")


def child_exit(server, worker):
    from prometheus_client import multiprocess  # imported only once when_ready set the directory

    multiprocess.mark_process_dead(worker.pid)


def on_exit(server):
    shutil.rmtree(os.environ["PROMETHEUS_MULTIPROC_DIR"], ignore_errors=True)
