"""gunicorn's server hooks for Plant Store, which gunicorn.conf.py names, and each worker's app.

Nothing happens when this module is imported: gunicorn calls each hook in its master or in a
worker, as its documentation says. The master checks the settings and reaches the store
(`on_starting`), then makes what the run needs once its sockets are bound (`when_ready`). Each
worker opens its own `Runtime` after the fork, as it loads the app built on it (`worker_app`,
gunicorn's `wsgi_app`), starts it (`post_worker_init`) and closes it (`worker_exit`). A process
is one worker, so the runtime it opened is this module's to hold.
"""

import os
import shutil
import signal
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

from plantstore.config import (
    DEFAULT_THREADS,
    MEMORY_THREADS,
    MEMORY_URL,
    Config,
    ConfigError,
    feed_waits_for,
    store_kind,
)
from plantstore.core.stores import SchemaTooNew, StoreUnavailable, StoreUnusable
from plantstore.operations.logs import current_request_id
from plantstore.serving.settings import (
    check_gunicorns_variables,
    check_workers,
    exposed_tokens_warning,
    read_settings,
    unreachable,
    waiting,
)
from plantstore.stores import prepare_store
from plantstore.tokens import fresh
from plantstore.tokens.last_good import LastGoodTokens
from plantstore.webhooks.subscribers import subscriber

#: The metrics' directories, in the temporary directory: this, the master's pid, and a suffix.
METRICS_PREFIX = "plantstore-metrics-"
#: The directories of the last good tokens, named alike.
TOKENS_PREFIX = "plantstore-tokens-"

#: The database the service started with (`prepare_store`): the master's, which every worker
#: it forks inherits and answers for.
_started_with = None
#: Where the run's processes keep the tokens file's last good tokens: the master's, made by
#: `when_ready`, which every worker it forks inherits.
_tokens_kept_in = None
#: This worker's gunicorn settings, once `post_fork` noted them.
_settings = None
#: This worker's store and deliverer (`plantstore.runtime.Runtime`), once `worker_app` opened them.
_runtime = None


def _serves_memory(environ) -> bool:
    return store_kind(environ.get("PLANTSTORE_STORE", "").strip() or MEMORY_URL) == "memory"


def default_workers(environ) -> int:
    """One worker process per core this process may run on with a shared store, so Python runs
    on each; one with the memory store, a dict that one process alone holds."""
    return 1 if _serves_memory(environ) else len(os.sched_getaffinity(0))


def default_threads(environ) -> int:
    """Each worker's threads: many where a shared store's batches grow with the requests that
    wait at once, few where the memory store's requests only compute (docs/operations.md)."""
    return MEMORY_THREADS if _serves_memory(environ) else DEFAULT_THREADS


def on_starting(server):
    """Stop the start, with one line, on what would make every worker fail.

    A bad setting, a second worker for the memory store (each would keep its own dict). A
    `PORT` gunicorn would fail to bind (`WEB_CONCURRENCY` and `FORWARDED_ALLOW_IPS` it refused
    before this runs). A database store is reached, and its schema brought up to date, here: a
    database newer than this code stops the start, and so does a SQLite file that is not a
    database or cannot be opened, and a store that cannot be reached within
    `PLANTSTORE_STORE_WAIT` seconds (the line says why; the log says once that it waits). Once
    started, a store lost is the workers' to wait for (503 meanwhile). Every worker answers only
    for the SQLite file opened here: a file put in its place while the service runs is refused.

    A tokens file that every user may read, holding tokens rather than their digests, is
    taken, with a warning: it is a setting that works, if unwisely.
    """
    if server.cfg.preload_app and server.cfg.workers > 1:
        # Loaded in the master, the app would import prometheus_client before `when_ready` named
        # its directory, and open the store's connections for every worker to share.
        raise SystemExit(
            "plantstore: with --preload each worker would count alone in /metrics; "
            "run one worker, or drop --preload"
        )
    global _started_with
    config = _checked_settings()
    if warning := exposed_tokens_warning(config):
        server.log.warning("plantstore: %s", warning)
    try:
        check_gunicorns_variables()
        check_workers(config, server.cfg.workers)
        _started_with = prepare_store(
            config.store_url,
            config.store_wait,
            on_waiting=lambda ex: server.log.warning("%s", waiting(config, ex)),
        )
    except StoreUnavailable as ex:
        raise SystemExit(f"plantstore: {unreachable(config, ex)}") from None
    except (ConfigError, SchemaTooNew, StoreUnusable) as ex:
        raise SystemExit(f"plantstore: {ex}") from None


def _checked_settings() -> Config:
    """The settings, as a start checks them; a bad one stops the process with one line."""
    try:
        return read_settings()
    except ConfigError as ex:
        raise SystemExit(f"plantstore: {ex}") from None


def when_ready(server):
    """The sockets are bound and no worker runs yet: make what the run needs, once; here rather
    than at the start, so that a start that fails leaves nothing behind (`on_exit` removes it).

    With a shared store, the metrics' directory (PROMETHEUS_MULTIPROC_DIR), which each worker's
    prometheus_client reads when first imported, after the fork. With no token configured, one
    in a file only this user can read, so the service never runs open; the log names the file,
    never the token. With a tokens file, the directory of its last good tokens
    (`plantstore.tokens.last_good`), for a worker that will find the file bad. And a log line
    naming each webhook subscriber as its warnings will, by origin and key: no path, query or
    password.
    """
    global _tokens_kept_in
    _remove_stale_directories()
    config = Config.from_env()
    if config.memory:
        os.environ.pop("PROMETHEUS_MULTIPROC_DIR", None)
    else:
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = tempfile.mkdtemp(prefix=_prefix(METRICS_PREFIX))
    tokens_file = config.tokens_file
    if not config.tokens and not tokens_file:
        tokens_file = str(fresh.make())
        os.environ["PLANTSTORE_TOKENS_FILE"] = tokens_file
        server.log.info(
            "plantstore: no token configured; this run accepts the one in %s (readable only by "
            "this user); set PLANTSTORE_TOKENS or PLANTSTORE_TOKENS_FILE to choose your own",
            tokens_file,
        )
    if tokens_file:
        _tokens_kept_in = tempfile.mkdtemp(prefix=_prefix(TOKENS_PREFIX))
        LastGoodTokens(_tokens_kept_in).take(tokens_file)
    for number, url in enumerate(config.webhook_urls, start=1):
        server.log.info(
            "plantstore: PLANTSTORE_WEBHOOK_URLS's URL %d is %s", number, subscriber(url).name
        )


def _prefix(kind: str) -> str:
    """The start of the name of a directory of this run's, of a `kind` (`METRICS_PREFIX`)."""
    return f"{kind}{os.getpid()}-"


def _remove_stale_directories() -> None:
    """Remove this user's metrics and tokens directories whose master is gone: killed, it left
    its own."""
    for kind in (METRICS_PREFIX, TOKENS_PREFIX):
        for directory in Path(tempfile.gettempdir()).glob(f"{kind}*-*"):
            pid = directory.name.removeprefix(kind).partition("-")[0]
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
    """Note this worker's gunicorn settings, for `worker_app` to open its runtime with, and have
    a stop that comes before the worker's own signal handlers end it at once.

    Until gunicorn installs the worker's handlers, after this hook, the worker has the master's,
    which queue a signal in this process's copy of the master, where nothing reads it: a stop
    that came then would be lost, and the master would wait `--graceful-timeout` (30 s) for a
    worker that serves on. A worker that has not started serving holds nothing to finish, so
    SIGTERM, SIGINT and SIGQUIT end it meanwhile. Nothing is opened here either: `worker_app`
    runs once gunicorn's handlers are installed.

    A memory-store worker that replaces an earlier one warns that it starts with no plants. The
    master counts the workers it forks (`worker.age`); a second one, after SIGHUP or a worker
    that died or stopped answering, has lost every plant the first one kept, while the service
    answers on, so an id can then take other content.
    """
    global _settings
    for stop in (signal.SIGTERM, signal.SIGINT, signal.SIGQUIT):
        signal.signal(stop, _exit_before_serving)
    _settings = worker.cfg
    if worker.age > 1 and Config.from_env().memory:
        server.log.warning(
            "plantstore: this worker starts with an empty memory store: the plants kept by "
            "the worker before it are gone"
        )


def _exit_before_serving(signum, frame):
    sys.exit(0)


def worker_app():
    """Open this worker's store and deliverer (its `Runtime`), and build the app on them
    (gunicorn's `wsgi_app`).

    Imported here, in the worker: the runtime imports prometheus_client, which must first be
    imported after `when_ready` named its directory. Loaded outside a worker (`gunicorn
    --check-config`, `--print-config`, or `--preload` in the master), it is built as for a
    worker of gunicorn's defaults, once the settings are checked as a start checks them.
    """
    from gunicorn.config import Config as GunicornConfig  # which reads the environment

    from plantstore.app import create_app
    from plantstore.runtime import Runtime

    global _runtime
    config = Config.from_env() if _settings else _checked_settings()
    settings = _settings or GunicornConfig()
    config = replace(
        config,
        forwarded_allow_ips=tuple(settings.forwarded_allow_ips),
        tokens_kept_in=_tokens_kept_in,
        feed_waits=feed_waits_for(settings.threads),
    )
    _runtime = Runtime(config, threads=settings.threads, started_with=_started_with)
    return create_app(_runtime.config, _runtime.store)


def post_worker_init(worker):
    """The app is loaded: start pruning the feed and delivering this worker's events, and end
    the requests that wait for the feed as soon as the worker is told to stop.

    gunicorn has no hook for a worker's SIGTERM (a stop, or a SIGHUP's replacement): it lets the
    requests under way finish, for up to `graceful_timeout`, and a request that waits for an
    event would hold the stop that long. So the signal first ends those waits (they answer an
    empty page, as at the end of their time), then goes to gunicorn's own handler, as before;
    system calls it interrupts are restarted, as gunicorn has them.

    A worker that serves an app named on gunicorn's command line (the bench's floor) never
    called `worker_app`, and has no runtime to start.
    """
    if _runtime is None:
        return
    _runtime.start()
    gunicorns = signal.getsignal(signal.SIGTERM)

    def stop(signum, frame):
        _runtime.stop_waiting()
        gunicorns(signum, frame)

    signal.signal(signal.SIGTERM, stop)
    signal.siginterrupt(signal.SIGTERM, False)


def worker_exit(server, worker):
    """Stop delivering, let attempts under way end, and close the worker's store, if it opened
    one."""
    if _runtime is not None:
        _runtime.close()


def post_request(worker, req, environ, resp):
    """The request is done: what this thread logs next concerns no request, until the next one."""
    current_request_id.set("-")


def child_exit(server, worker):
    """A dead worker's live gauges (requests in flight) go; its counts stay in the scrape."""
    if "PROMETHEUS_MULTIPROC_DIR" in os.environ:
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(worker.pid)


def on_exit(server):
    """Remove what the run made for itself: a token file, the metrics' directory and the last
    good tokens'."""
    fresh.remove()
    directory = os.environ.get("PROMETHEUS_MULTIPROC_DIR", "")
    if Path(directory).name.startswith(_prefix(METRICS_PREFIX)):
        shutil.rmtree(directory, ignore_errors=True)
    if _tokens_kept_in is not None:
        shutil.rmtree(_tokens_kept_in, ignore_errors=True)
