"""gunicorn's settings and server hooks for Plant Store: a plain gunicorn configuration module.

`plantstore serve` runs gunicorn with them (plantstore/serving/server.py), and the checkout's
`gunicorn.conf.py` imports them for `gunicorn -c gunicorn.conf.py`, so the two cannot differ.
Every setting can be changed from the environment (the README's configuration table) or by a
gunicorn flag on the command line, which overrides this module.
"""

import os
import shutil
import tempfile
from pathlib import Path

from plantstore.config import Config, ConfigError
from plantstore.operations.logs import current_request_id
from plantstore.serving import run_token
from plantstore.serving.server_config import check_workers, read_all, unreachable
from plantstore.stores import (
    SchemaTooNew,
    StoreUnavailable,
    StoreUnusable,
    prepare_store,
    remember_started_store,
)
from plantstore.webhooks.subscribers import subscriber

# Read once here, in the master, so that a bad setting stops the start with one line naming it.
# Every worker forked from it serves with these, those started after a SIGHUP or in place of one
# that died too; each watches the tokens file for changes (plantstore/api/auth.py).
try:
    _config, _server = read_all(os.environ)
except ConfigError as ex:
    raise SystemExit(f"plantstore: {ex}") from None

# The app of each worker, built after the fork: each worker opens its own connections.
wsgi_app = "plantstore.serving.settings:worker_app()"

# bind is gunicorn's default: 127.0.0.1:8000, or 0.0.0.0:$PORT when PORT is set.

# One worker process per core with a shared store; one with the memory store, a dict in one
# process (server_config.ServerConfig).
workers = _server.workers

# gunicorn's threaded worker. Like the sync worker it must sit behind a buffering proxy (gunicorn's
# "Deploying Gunicorn"): deploy/nginx.conf reads each request whole before gunicorn sees it.
worker_class = "gthread"
threads = _config.threads

# Proxies trusted for X-Forwarded-For/-Proto and SCRIPT_NAME, by gunicorn and the app alike.
forwarded_allow_ips = str(_config.forwarded_allow_ips)

# Bounds on the request line and headers; gunicorn refuses a request over them itself.
limit_request_line = _server.limit_request_line
limit_request_fields = _server.limit_request_fields
limit_request_field_size = _server.limit_request_field_size

# A worker silent this long is restarted: a heartbeat, not a per-request timeout.
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

# Every line of the error log (stderr) in one format, with the id of the request it concerns
# (plantstore/operations/logs.py). With PLANTSTORE_LOG_FORMAT json both logs are one JSON object
# a line, and access_log_format goes unused.
logger_class = {
    "text": "plantstore.operations.logs.Logger",
    "json": "plantstore.operations.logs.JsonLogger",
}[_server.log_format]

# gunicorn's control socket is one path per user: several servers on a machine would fight over
# it, and nothing here uses it.
control_socket_disable = True

#: The metrics' directories, in the temporary directory: this, the master's pid, and a suffix.
METRICS_PREFIX = "plantstore-metrics-"

#: The worker's store and deliverer (`plantstore.runtime.Runtime`), once `worker_app` made them.
_runtime = None


def on_starting(server):
    """Stop the start, with one line, on what would make every worker fail.

    The memory store takes one worker: each would keep its own dict. A database store is
    reached, and its schema brought up to date, here: a database newer than this code stops
    the start, and so does a SQLite file that is not a database or cannot be opened, and a
    store that cannot be reached within `PLANTSTORE_STORE_WAIT` seconds (the line says why).
    Once started, a store lost is the workers' to wait for (503 meanwhile). Every worker
    answers only for the SQLite file opened here: a file put in its place while the service
    runs is refused.
    """
    if server.cfg.preload_app and server.cfg.workers > 1:
        # Loaded in the master, the app would import prometheus_client before `when_ready` named
        # its directory, and open the store's connections for every worker to share.
        raise SystemExit(
            "plantstore: with --preload each worker would count alone in /metrics; "
            "run one worker, or drop --preload"
        )
    try:
        check_workers(_config, server.cfg.workers)
        prepare_store(_config.store_url, _config.store_wait)
    except StoreUnavailable as ex:
        raise SystemExit(f"plantstore: {unreachable(_config, ex)}") from None
    except (ConfigError, SchemaTooNew, StoreUnusable) as ex:
        raise SystemExit(f"plantstore: {ex}") from None
    remember_started_store(_config.store_url)


def when_ready(server):
    """The sockets are bound and no worker runs yet: make what the run needs, once.

    Made here rather than at the start, so that a start that fails (a port in use) leaves
    nothing behind; `on_exit` removes both.

    Metrics: prometheus_client keeps each worker's values in files of the directory named by
    PROMETHEUS_MULTIPROC_DIR, which it reads when it is first imported; the workers, forked
    after this, import it. The master never does.

    A token: with none configured the service does not run open. One is written into a file
    only this user can read, the workers' PLANTSTORE_TOKENS_FILE. The log names the file, never
    the token.

    The log names each webhook subscriber as its warnings will, by origin and key, beside its
    place in PLANTSTORE_WEBHOOK_URLS: so an operator can tell which URL a warning is about,
    though several share a host, and the log shows no path, query or password.
    """
    global _config
    _remove_stale_metrics_directories()
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = tempfile.mkdtemp(
        prefix=f"{METRICS_PREFIX}{os.getpid()}-"
    )
    if not _config.tokens and not _config.tokens_file:
        path = run_token.make()
        os.environ["PLANTSTORE_TOKENS_FILE"] = str(path)
        _config = Config.from_env()
        server.log.info(
            "plantstore: no token configured; this run accepts the one in %s (readable only by "
            "this user); set PLANTSTORE_TOKENS or PLANTSTORE_TOKENS_FILE to choose your own",
            path,
        )
    for number, url in enumerate(_config.webhook_urls, start=1):
        server.log.info(
            "plantstore: PLANTSTORE_WEBHOOK_URLS's URL %d is %s", number, subscriber(url).name
        )


def _remove_stale_metrics_directories() -> None:
    """Remove this user's metrics directories whose master is gone: killed, it left its own."""
    for directory in Path(tempfile.gettempdir()).glob(f"{METRICS_PREFIX}*-*"):
        pid = directory.name.removeprefix(METRICS_PREFIX).partition("-")[0]
        if pid.isdigit() and directory.stat().st_uid == os.getuid() and not _running(int(pid)):
            shutil.rmtree(directory, ignore_errors=True)


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process
    return True


def post_fork(server, worker):
    """Warn when a memory-store worker replaces an earlier one: it starts with no plants.

    The master counts the workers it forks (`worker.age`); a second one, after SIGHUP or a
    worker that died or stopped answering, has lost every plant the first one kept, while the
    service answers on, so an id can then take other content.
    """
    if _config.memory and worker.age > 1:
        server.log.warning(
            "plantstore: this worker starts with an empty memory store: the plants kept by "
            "the worker before it are gone"
        )


def worker_app():
    """Open this worker's store and deliverer, and build the app on them.

    Imported here, in the worker: the app imports prometheus_client, which must first be
    imported after `when_ready` named its directory.
    """
    from plantstore.app import create_app
    from plantstore.runtime import Runtime

    global _runtime
    _runtime = Runtime(_config)
    return create_app(_config, _runtime.store)


def post_worker_init(worker):
    """The app is loaded: start delivering this worker's events.

    An app named on gunicorn's command line (the benchmark's floor) has no runtime.
    """
    if _runtime is not None:
        _runtime.start()


def worker_exit(server, worker):
    """Stop delivering, let attempts under way end, and close the worker's store."""
    if _runtime is not None:
        _runtime.close()


def post_request(worker, req, environ, resp):
    """The request is done: what this thread logs next concerns no request, until the next one."""
    current_request_id.set("-")


def child_exit(server, worker):
    """A dead worker's live gauges (requests in flight) go; its counts stay in the scrape."""
    from prometheus_client import multiprocess

    multiprocess.mark_process_dead(worker.pid)


def on_exit(server):
    """Remove what the run made for itself: a token file, and the metrics' directory."""
    run_token.remove()
    shutil.rmtree(os.environ.get("PROMETHEUS_MULTIPROC_DIR", ""), ignore_errors=True)
