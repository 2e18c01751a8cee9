"""The error log: one format for every line, and the request id on each line of a request's.

gunicorn's `logger_class` setting (`Logger`) sets up Python's logging in the master and the
workers: gunicorn's own error logger, Falcon's `req.log_error` (through the app's `Request`,
plantstore/operations/request.py) and every library's or module's logger
(`logging.getLogger(__name__)`) all reach gunicorn's error-log handler (stderr, or
`--error-logfile`), which writes each line as

    [2026-11-23 16:32:17 +0000] [4242] request_id=5c21...896b [falcon] [ERROR] POST /plants: ...

`request_id` is the `X-Request-ID` answered to the request the logging thread was serving
(`-` outside one), the same id its access-log line carries. Every line of a message that spans
several, a traceback's included, carries the whole prefix, so a request's trouble is found
with one grep.

With `PLANTSTORE_LOG_FORMAT=json`, `Logger` writes both logs as one JSON object a line,
for log collectors: the error log's with the time, level, logger, request id and message (a
traceback in one field), the access log's with the request id, client, method, path (never
the query), the name of its bearer token (null without one), route (its template; null where
none matched), status and duration. Neither has a header's value, so never a token.
"""

import json
import logging
import os
import re
from collections.abc import Mapping
from contextvars import ContextVar
from datetime import UTC, datetime

from gunicorn import glogging

from plantstore.api.auth import TOKEN_KEY

#: The id of the request this thread serves: set by the `RequestLog` middleware
#: (plantstore/operations/request_log.py), and put back to `-` by gunicorn's `post_request` hook
#: once the request is done.
current_request_id: ContextVar[str] = ContextVar("current_request_id", default="-")

#: The WSGI environ's key under which `RequestLog` leaves the template of the route a request
#: took, for the JSON access log (gunicorn's `{key}e` atom).
ROUTE_KEY = "plantstore.route"

PREFIX = "%(asctime)s [%(process)d] request_id=%(request_id)s [%(name)s] [%(levelname)s] "
DATE_FORMAT = "[%Y-%m-%d %H:%M:%S %z]"

#: What a client may put in a logged field that a line of text must not carry as it is: a
#: control character (CR and LF forge a line, ESC drives a terminal), and the `\\` and `"` that
#: escape and delimit.
_UNSAFE = re.compile(r'[\x00-\x1f\x7f-\x9f\\"]')
_ESCAPES = {"\\": "\\\\", '"': '\\"'}


def json_lines(environ: Mapping[str, str]) -> bool:
    """Whether the logs are JSON lines (`PLANTSTORE_LOG_FORMAT=json`), as gunicorn sets them up
    before the start has checked the settings."""
    return environ.get("PLANTSTORE_LOG_FORMAT", "").strip() == "json"


def escaped(text: str) -> str:
    """`text` with each control character written as `\\xNN`, `\\` as `\\\\` and `"` as `\\"`."""
    return _UNSAFE.sub(lambda found: _ESCAPES.get(found[0]) or f"\\x{ord(found[0]):02x}", text)


class RequestIdFilter(logging.Filter):
    """Give every record the id of the request its thread was serving when it was logged."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.request_id = current_request_id.get()
        return True


_REQUEST_ID_FILTER = RequestIdFilter()


class RefusalFilter(logging.Filter):
    """Keep what a client sent out of gunicorn's line on a request it refused as malformed.

    gunicorn logs such a refusal as `Invalid request from ip=<peer>: <what was wrong>`, and what
    was wrong quotes the request line or header field it could not read: a field may hold a
    token. The line keeps the peer and says no more.
    """

    PREFIX = "Invalid request from ip="

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if message.startswith(self.PREFIX):
            peer = message.partition(": ")[0]
            record.msg, record.args = f"{peer}: malformed (not quoted: it may hold a token)", ()
        return True


_REFUSAL_FILTER = RefusalFilter()


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


def _known(value):
    """`-`, the text logs' word for what is not known (no request, an unread method), as null."""
    return None if value in ("-", None) else value


def _time(record: logging.LogRecord) -> str:
    return datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds")


class JsonFormatter(logging.Formatter):
    """An error-log record as one JSON object, its traceback (if any) one field of it."""

    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "time": _time(record),
            "level": record.levelname,
            "logger": record.name,
            "process": record.process,
            "request_id": _known(getattr(record, "request_id", "-")),
            "message": record.getMessage(),
        }
        if record.exc_info:
            entry["traceback"] = self.formatException(record.exc_info)
        if record.stack_info:
            entry["stack"] = self.formatStack(record.stack_info)
        return json.dumps(entry)


class JsonAccessFormatter(logging.Formatter):
    """An access-log record as one JSON object, from the atoms gunicorn gives the record.

    gunicorn logs each request as `access_log_format % atoms`: the atoms (`h`, `m`, `U`,
    `{header}o`, ...) are the record's args, serialised here instead. `-` is what gunicorn
    writes for what it does not know (the method and path of a request it could not read).
    """

    def format(self, record: logging.LogRecord) -> str:
        atoms = record.args
        return json.dumps(
            {
                "time": _time(record),
                "request_id": _known(atoms.get("{x-request-id}o")),
                "client": _known(atoms.get("h")),
                "token": atoms.get(f"{{{TOKEN_KEY}}}e"),
                "method": _known(atoms.get("m")),
                "path": _known(atoms.get("U")),
                "route": atoms.get(f"{{{ROUTE_KEY}}}e"),
                "status": int(atoms["s"]),
                "duration_us": atoms["D"],
            }
        )


class EscapedAtoms(dict):
    """gunicorn's atoms for the text access log, every control character in them escaped.

    gunicorn's own wrapper escapes `"` alone, and the path it logs is decoded: `/x%0D%0A...`
    would write a line of the client's making into the log. Looked up as gunicorn's wrapper
    does (a header's atom in any case, `-` for what is missing), and escaped as the format reads
    them: gunicorn makes an atom of every header, of which the format uses a few.
    """

    def __getitem__(self, name: str):
        value = self.get(name.lower() if name.startswith("{") else name, "-")
        return escaped(value) if isinstance(value, str) else value


#: The atoms the JSON access log reads (`JsonAccessFormatter`), whatever `access_log_format` says.
JSON_ATOMS = ("{x-request-id}o", "h", f"{{{TOKEN_KEY}}}e", "m", "U", f"{{{ROUTE_KEY}}}e", "s", "D")
#: How the atoms a format names most are made, as gunicorn makes them: of a request's answer,
#: request, WSGI environ and time taken.
_MADE = {
    "h": lambda resp, req, environ, took: environ.get("REMOTE_ADDR", "-"),
    "m": lambda resp, req, environ, took: environ.get("REQUEST_METHOD"),
    "U": lambda resp, req, environ, took: environ.get("PATH_INFO"),
    "q": lambda resp, req, environ, took: environ.get("QUERY_STRING"),
    "s": lambda resp, req, environ, took: str(resp.status).split(None, 1)[0],
    "D": lambda resp, req, environ, took: took.seconds * 1_000_000 + took.microseconds,
}
_ATOM = re.compile(r"%\(([^)]+)\)")
#: What a header or environ atom is when the request has none: left out, as gunicorn leaves it.
_ABSENT = object()


def _maker(name: str):
    """How the atom `name` is made; None for one made here by no rule but gunicorn's own."""
    if name in _MADE:
        return _MADE[name]
    if not (name.startswith("{") and name[-2:] in ("}i", "}o", "}e")):
        return None
    key, kind = name[1:-2].lower(), name[-1]
    if kind == "e":
        return lambda resp, req, environ, took: next(
            (value for field, value in environ.items() if field.lower() == key), _ABSENT
        )
    return lambda resp, req, environ, took: next(
        (value for field, value in (req if kind == "i" else resp).headers if field.lower() == key),
        _ABSENT,
    )


class Logger(glogging.Logger):
    """gunicorn's logger, whose error log takes every logger's lines, in one format.

    gunicorn makes the error log's handler from its settings (`errorlog`, `loglevel`) and
    reopens it on SIGUSR1; this gives it the format and the request id, and hands it the root
    logger's lines too. gunicorn calls `setup` again on SIGHUP, with a new handler.

    With `PLANTSTORE_LOG_FORMAT=json`, each line of both logs is one JSON object. gunicorn sets
    its logger up before the start checks the settings: any other value writes text here, and
    the start then stops, saying why.
    """

    atoms_wrapper_class = EscapedAtoms

    def setup(self, cfg) -> None:
        super().setup(cfg)
        as_json = json_lines(os.environ)
        for handler in self.error_log.handlers:
            handler.setFormatter(JsonFormatter() if as_json else LineFormatter())
            handler.addFilter(_REQUEST_ID_FILTER)
            handler.addFilter(_REFUSAL_FILTER)
        if as_json:
            # The access log's atoms as gunicorn made them: its default wrapper escapes `"` for
            # a format string, which JSON does itself.
            self.atoms_wrapper_class = dict
            for handler in self.access_log.handlers:
                handler.setFormatter(JsonAccessFormatter())
        names = JSON_ATOMS if as_json else _ATOM.findall(cfg.access_log_format)
        makers = [(name, _maker(name)) for name in names]
        self._printed = None if any(make is None for _, make in makers) else makers
        root = logging.getLogger()
        root.handlers = list(self.error_log.handlers)
        root.setLevel(self.loglevel)
        # urllib3's debug lines name each webhook request's path and query, which may hold a
        # subscriber's secret: of a subscriber, the log names only its scheme, host and port.
        logging.getLogger("urllib3").setLevel(max(self.loglevel, logging.INFO))

    def atoms(self, resp, req, environ, request_time) -> dict:
        """The atoms the access log prints, and no others.

        gunicorn's own makes one of every request header, answer header and environ key, and a
        date, for each request: tens of microseconds, for a format that prints six. A format
        naming an atom not made here gets gunicorn's.
        """
        if self._printed is None:
            return super().atoms(resp, req, environ, request_time)
        made = ((name, make(resp, req, environ, request_time)) for name, make in self._printed)
        return {name: value for name, value in made if value is not _ABSENT}
