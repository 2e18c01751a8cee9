"""gunicorn's settings for Plant Store, packaged so that they run from any directory.

`plantstore serve` loads them (`-c python:plantstore.serving.settings`), and so does the
checkout's `gunicorn.conf.py`, which imports this module, so the two cannot differ. Every
setting can be changed from the environment; a flag on the command line (`--bind`,
`--workers`, ...) overrides this module. The README's configuration table lists them all.
"""

import os
import shutil
import sys
import tempfile

from plantstore.config import ConfigError, check_workers, read_all
from plantstore.operations.logs import current_request_id
from plantstore.serving import run_token
from plantstore.stores import (
    SchemaTooNew,
    StoreUnavailable,
    StoreUnusable,
    open_store,
    remember_started_store,
)

# The settings, read once here to stop a bad start with one line; each worker reads the app's
# again. `plantstore serve` has read them already, before gunicorn read WEB_CONCURRENCY and
# FORWARDED_ALLOW_IPS itself; `gunicorn -c gunicorn.conf.py` refuses a bad one of those two in
# gunicorn's own words, before this module runs.
try:
    _config, _server = read_all(os.environ)
except ConfigError as ex:
    raise SystemExit(f"plantstore: {ex}") from None

# The app factory, called in each worker after it forks (the app is not preloaded), so each
# worker opens its own database connections.
wsgi_app = "plantstore.app:create_app()"

# bind is left to gunicorn: 127.0.0.1:8000, or 0.0.0.0:$PORT when PORT is set (checked with
# the rest, since gunicorn would only find a bad one when it binds).

# One worker process per core with a shared store, one with the memory store (see ServerConfig).
workers = _server.workers

# Each process serves requests on threads (gthread worker), which overlap waiting for I/O.
# The stock threaded worker; gunicorn's docs put it behind a buffering proxy, deploy/nginx.conf.
worker_class = "gthread"
threads = _config.threads

# Proxies trusted for X-Forwarded-For/-Proto and SCRIPT_NAME, by gunicorn and the app alike.
forwarded_allow_ips = str(_config.forwarded_allow_ips)

# Bounds on the request line and headers; a request over them is refused before the app.
limit_request_line = _server.limit_request_line
limit_request_fields = _server.limit_request_fields
limit_request_field_size = _server.limit_request_field_size

# A worker silent this long is restarted (a heartbeat, not a per-request timeout).
timeout = _server.timeout

# On SIGTERM, requests in flight get this long to finish.
graceful_timeout = _server.graceful_timeout

# How long an idle keep-alive connection is held open.
keepalive = _server.keepalive

# One access-log line per request on stdout; never with the Authorization header.
accesslog = "-"
access_log_format = (
    '%(h)s request_id=%({x-request-id}o)s "%(m)s %(U)s" status=%(s)s duration_us=%(D)s'
)

# Every line of the error log (stderr) in one format, with the id of the request it concerns:
# gunicorn's, Falcon's and every library's (see plantstore/logs.py). With PLANTSTORE_LOG_FORMAT
# json, both logs are one JSON object a line, and access_log_format goes unused.
logger_class = {
    "text": "plantstore.operations.logs.Logger",
    "json": "plantstore.operations.logs.JsonLogger",
}[_server.log_format]

# gunicorn's control socket is one path per user: several servers on a machine would fight over
# it, and nothing here uses it.
control_socket_disable = True


def on_starting(server):
    """Check what would make every worker fail, before any starts; make a token if none is set.

    The memory store takes one worker: each would keep its own dict. A database store brings
    its schema up to date here, so that a database newer than this code stops the start with
    one line, and so does a SQLite file that is not a database or cannot be opened. One that
    cannot be reached now is left to the workers, which serve once it can. Every worker, those
    started in place of one that died or after a SIGHUP too, answers only for the SQLite file
    opened here: a file put in its place while the service runs is refused until a restart.

    With no token configured the service does not run open: one is made here, once, into a
    file only this user can read, and the workers (forked from here) read that file. The log
    names the file, never the token.
    """
    try:
        check_workers(_config, server.cfg.workers)
        open_store(_config.store_url).close()
    except (ConfigError, SchemaTooNew, StoreUnusable) as ex:
        raise SystemExit(f"plantstore: {ex}") from None
    except StoreUnavailable:
        pass
    remember_started_store(_config.store_url)
    if not _config.tokens:
        path = run_token.make()
        os.environ["PLANTSTORE_TOKENS_FILE"] = str(path)
        server.log.info(
            "plantstore: no token configured; this run accepts the one in %s (readable only by "
            "this user); set PLANTSTORE_TOKENS or PLANTSTORE_TOKENS_FILE to choose your own",
            path,
        )


def post_fork(server, worker):
    """Warn when a memory-store worker replaces an earlier one: it starts with no plants.

    The master counts the workers it forks (`worker.age`); a second one, after SIGHUP or a
    worker that died or stopped answering, has lost every plant the first one kept, while
    the service answers on, so an id can then take other content.
    """
    if _config.memory and worker.age > 1:
        server.log.warning(
            "plantstore: this worker starts with an empty memory store: the plants kept by "
            "the worker before it are gone"
        )


def post_request(worker, req, environ, resp):
    """The request is done: what this thread logs next concerns no request, until the next one."""
    current_request_id.set("-")


def on_exit(server):
    """Remove what the run made for itself: a token file, and the metrics' directory."""
    run_token.remove()
    shutil.rmtree(os.environ["PROMETHEUS_MULTIPROC_DIR"], ignore_errors=True)


# Metrics (plantstore/metrics.py): each worker keeps its counts in files of one directory, and a
# scrape adds up all of them. The master makes the directory once its sockets are bound, before
# the first fork, and names it in PROMETHEUS_MULTIPROC_DIR, which prometheus_client reads when it
# is first imported: the master must not import it before. A dead worker's counts stay; its
# live gauges (requests in flight) go. The directory goes when the master exits.


def when_ready(server):
    """The sockets are bound, no worker runs yet: guard SIGHUP, make the metrics' directory."""
    _refuse_a_reload_with_bad_settings(server)
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


def _refuse_a_reload_with_bad_settings(server):
    """Make a SIGHUP whose settings are bad change nothing, rather than stop the service.

    On SIGHUP gunicorn's master starts new workers, which read the settings again (a tokens
    file first of all), and stops the old ones; a new worker that cannot read them fails to
    boot, and the master then shuts down. No hook can stop that: `on_reload` runs before the
    new workers start, but cannot keep them from starting. So the master's SIGHUP handler
    reads the settings first, as a worker will, and on a bad one logs the line a start would
    give (which never holds a token) and keeps the workers it has, with the tokens they read.
    """
    reload = server.handle_hup

    def handle_hup():
        try:
            read_all(os.environ)
        except ConfigError as ex:
            server.log.error("plantstore: reload refused: %s", ex)
        else:
            reload()

    server.handle_hup = handle_hup
