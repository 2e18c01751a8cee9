"""The error log: one format for every line, and the request id on each line of a request's.

gunicorn's `logger_class` setting (`Logger`) sets up Python's logging in the master and the
workers: gunicorn's own error logger, Falcon's `req.log_error` (through `Request`) and every
library's or module's logger (`logging.getLogger(__name__)`) all reach gunicorn's error-log
handler (stderr, or `--error-logfile`), which writes each line as

    [2026-11-23 16:32:17 +0000] [4242] request_id=5c21...896b [falcon] [ERROR] POST /plants: ...

`request_id` is the `X-Request-ID` answered to the request the logging thread was serving
(`-` outside one), the same id its access-log line carries. Every line of a message that spans
several, a traceback's included, carries the whole prefix, so a request's trouble is found
with one grep.
"""

import logging
from contextvars import ContextVar

import falcon
from gunicorn import glogging

#: The id of the request this thread serves: set by `plantstore.middleware.RequestId`, and
#: put back to `-` by gunicorn's `post_request` hook once the request is done.
current_request_id: ContextVar[str] = ContextVar("current_request_id", default="-")

PREFIX = "%(asctime)s [%(process)d] request_id=%(request_id)s [%(name)s] [%(levelname)s] "
DATE_FORMAT = "[%Y-%m-%d %H:%M:%S %z]"

_falcon_log = logging.getLogger("falcon")


class RequestIdFilter(logging.Filter):
    """Give every record the id of the request its thread was serving when it was logged."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.request_id = current_request_id.get()
        return True


_REQUEST_ID_FILTER = RequestIdFilter()


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


class Logger(glogging.Logger):
    """gunicorn's logger, whose error log takes every logger's lines, in one format.

    gunicorn makes the error log's handler from its settings (`errorlog`, `loglevel`) and
    reopens it on SIGUSR1; this gives it the format and the request id, and hands it the root
    logger's lines too. gunicorn calls `setup` again on SIGHUP, with a new handler.
    """

    def setup(self, cfg) -> None:
        super().setup(cfg)
        for handler in self.error_log.handlers:
            handler.setFormatter(LineFormatter())
            handler.addFilter(_REQUEST_ID_FILTER)
        root = logging.getLogger()
        root.handlers = list(self.error_log.handlers)
        root.setLevel(self.loglevel)


class Request(falcon.Request):
    """Falcon's request, whose `log_error` writes through logging rather than to `wsgi.errors`.

    gunicorn's `wsgi.errors` writes straight to stderr, bypassing the log's format; Falcon
    writes there the traceback of a 500, and the app why a store could not serve.
    """

    def log_error(self, message: str) -> None:
        _falcon_log.error("%s %s: %s", self.method, self.path, message.rstrip("\n"))
