"""gunicorn's settings and hooks for Plant Store: `gunicorn -c gunicorn.conf.py` from the checkout.

`plantstore serve` runs gunicorn with this very file (plantstore/serving/gunicorn.conf.py is a
link to it, installed with the package), so the two cannot differ. Every setting here is
gunicorn's own, and gunicorn's own ways override it: `GUNICORN_CMD_ARGS`, then the command
line. The service's own settings are the `PLANTSTORE_*` variables, which the hooks read.
"""

import os

from plantstore.serving import hooks, legacy

# The app of each worker, built on the store the worker opens after the fork.
wsgi_app = "plantstore.serving.hooks:worker_app()"

# bind is gunicorn's default: 127.0.0.1:8000, or 0.0.0.0:$PORT when PORT is set.

# One worker process per core with a shared store; one with the memory store, a dict in one
# process. WEB_CONCURRENCY, which gunicorn reads for its own default, decides when it is set.
if "WEB_CONCURRENCY" not in os.environ:
    workers = hooks.default_workers(os.environ)

# gunicorn's threaded worker. Like the sync worker it must sit behind a buffering proxy (gunicorn's
# "Deploying Gunicorn"): deploy/nginx.conf reads each request whole before gunicorn sees it.
worker_class = "gthread"
# Its threads: 32 with a shared store, whose batches hold the changes of requests waiting at
# once; 4 with the memory store, whose requests only compute (docs/operations.md, "Threads").
threads = hooks.default_threads(os.environ)

# How long an idle keep-alive connection is held open, for clients and nginx's `keepalive`.
keepalive = 5

# One access-log line per request on stdout, naming its token by its name (`token=dashboard`, or
# `-` without one); never with the Authorization header.
accesslog = "-"
access_log_format = (
    '%(h)s request_id=%({x-request-id}o)s token=%({plantstore.token}e)s "%(m)s %(U)s" '
    "status=%(s)s duration_us=%(D)s"
)

# Every line of the error log (stderr) in one format, with the id of the request it concerns;
# with PLANTSTORE_LOG_FORMAT=json both logs are one JSON object a line, and access_log_format
# goes unused (plantstore/operations/logs.py).
logger_class = "plantstore.operations.logs.Logger"

# gunicorn's control socket is one path per user: several servers on a machine would fight over
# it, and nothing here uses it.
control_socket_disable = True

on_starting = hooks.on_starting
when_ready = hooks.when_ready
post_fork = hooks.post_fork
post_worker_init = hooks.post_worker_init
worker_exit = hooks.worker_exit
post_request = hooks.post_request
child_exit = hooks.child_exit
on_exit = hooks.on_exit

# 1.2's GUNICORN_THREADS, GUNICORN_TIMEOUT and the like, for one more release (with a warning).
globals().update(legacy.settings(os.environ))
