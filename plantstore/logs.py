"""The error log: one format for every line, and the request id on each line of a request's.

gunicorn's `logconfig_dict` setting (`LOG_CONFIG`) configures Python's logging in the master
and the workers: gunicorn's own error logger, Falcon's `req.log_error` (through `Request`) and
every library's or module's logger (`logging.getLogger(__name__)`) all reach one handler on
stderr, which writes each line as

    [2026-11-23 16:32:17 +0000] [4242] request_id=5c21...896b [falcon] [ERROR] POST /plants: ...

`request_id` is the `X-Request-ID` answered to the request the logging thread was serving
(`-` outside one), the same id its access-log line carries. Every line of a message that spans
several, a traceback's included, carries the whole prefix, so a request's trouble is found
with one grep.
"""

import logging
from contextvars import ContextVar

import falcon

#: The id of the request this thread serves: set by `plantstore.middleware.RequestId`, and
#: put back to `-` by gunicorn's `post_request` hook once the request is done.
current_request_id: ContextVar[str] = ContextVar("current_request_id", default="-")

PREFIX = "%(asctime)s [%(process)d] request_id=%(request_id)s [%(name)s] [%(levelname)s] "
DATE_FORMAT = "[%Y-%m-%d %H:%M:%S %z]"

LOG_CONFIG = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {"request_id": {"()": "plantstore.logs.RequestIdFilter"}},
    "formatters": {"lines": {"()": "plantstore.logs.LineFormatter"}},
    "handlers": {
        "error_log": {
            "class": "logging.StreamHandler",
            "stream": "ext://sys.stderr",
            "formatter": "lines",
            "filters": ["request_id"],
        }
    },
    "root": {"level": "INFO", "handlers": ["error_log"]},
    # gunicorn's error logger hands its lines to the root's handler. Its level is left to
    # gunicorn's `loglevel`; its access logger is not named, so it keeps gunicorn's own
    # handler and format (`accesslog`, `access_log_format`).
    "loggers": {"gunicorn.error": {"handlers": [], "propagate": True}},
}

_falcon_log = logging.getLogger("falcon")


class RequestIdFilter(logging.Filter):
    """Give every record the id of the request its thread was serving when it was logged."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.request_id = current_request_id.get()
        return True


class LineFormatter(logging.Formatter):
    """Write `PREFIX` before the message, and again before each further line of it."""

    def __init__(self) -> None:
        super().__init__(PREFIX + "%(message)s", DATE_FORMAT)

    def format(self, record: logging.LogRecord) -> str:
        first, *rest = super().format(record).split("\n")
        if not rest:
            return first
        prefix = PREFIX % vars(record)
        return "\n".join([first, *(prefix + line for line in rest)])


class Request(falcon.Request):
    """Falcon's request, whose `log_error` writes through logging rather than to `wsgi.errors`.

    gunicorn's `wsgi.errors` writes straight to stderr, bypassing the log's format; Falcon
    writes there the traceback of a 500, and the app why a store could not serve.
    """

    def log_error(self, message: str) -> None:
        _falcon_log.error("%s %s: %s", self.method, self.path, message.rstrip("\n"))
