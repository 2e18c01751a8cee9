"""The `GUNICORN_*` variables that 1.2 read itself, still read in 1.3, and gone after it.

Each sets a gunicorn setting, which gunicorn takes on its command line or in
`GUNICORN_CMD_ARGS` now: those still win over these, as they won over the variables before.
"""

import logging
import sys
from collections.abc import Mapping

from plantstore.config import ConfigError, env_int
from plantstore.operations.logs import JsonFormatter, json_lines

#: The longest request line and the most header fields gunicorn honours: it silently takes a
#: larger setting as these (`gunicorn.http.message.MAX_REQUEST_LINE`, `MAX_HEADERS`).
MAX_REQUEST_LINE = 8190
MAX_REQUEST_FIELDS = 32768

#: The most seconds a timeout may be: gunicorn adds it to the time as a float, which a huge one
#: overflows, and an hour is longer than a worker, a stop or an idle connection should take.
MAX_SECONDS = 3600

#: Each variable: the setting it sets, gunicorn's flag for it, and the values 1.2 accepted
#: (seconds, up to `MAX_SECONDS`).
VARIABLES = {
    "GUNICORN_THREADS": ("threads", "--threads", 1, None),
    "GUNICORN_TIMEOUT": ("timeout", "--timeout", 1, MAX_SECONDS),
    "GUNICORN_GRACEFUL_TIMEOUT": ("graceful_timeout", "--graceful-timeout", 0, MAX_SECONDS),
    "GUNICORN_KEEPALIVE": ("keepalive", "--keep-alive", 0, MAX_SECONDS),
    "GUNICORN_LIMIT_REQUEST_LINE": (
        "limit_request_line",
        "--limit-request-line",
        0,
        MAX_REQUEST_LINE,
    ),
    "GUNICORN_LIMIT_REQUEST_FIELDS": (
        "limit_request_fields",
        "--limit-request-fields",
        1,
        MAX_REQUEST_FIELDS,
    ),
    "GUNICORN_LIMIT_REQUEST_FIELD_SIZE": (
        "limit_request_field_size",
        "--limit-request-field_size",
        1,
        None,
    ),
}


def settings(environ: Mapping[str, str]) -> dict[str, int]:
    """The gunicorn settings the variables set in `environ` ask for.

    Each set is named in one warning line on stderr, with the flag that replaces it: one JSON
    object, as the error log writes it, with `PLANTSTORE_LOG_FORMAT=json`. gunicorn reads this
    before its log is set up, so the line is written here.

    Raises:
        SystemExit: one of them is not a number it accepts, said in one line as 1.2 said it.
    """
    found = {name: VARIABLES[name] for name in VARIABLES if environ.get(name, "").strip()}
    try:
        taken = {
            setting: env_int(environ, name, 0, minimum, maximum)
            for name, (setting, _, minimum, maximum) in found.items()
        }
    except ConfigError as ex:
        raise SystemExit(f"plantstore: {ex}") from None
    if found:
        replaced = ", ".join(f"{name} by {flag}" for name, (_, flag, _, _) in found.items())
        _warn(
            "plantstore: the GUNICORN_* variables go after 1.3; put gunicorn's own flags in "
            f"GUNICORN_CMD_ARGS or on its command line instead: {replaced}",
            environ,
        )
    return taken


def _warn(message: str, environ: Mapping[str, str]) -> None:
    """Write `message` on stderr as a warning of the error log's format."""
    if json_lines(environ):
        record = logging.LogRecord(__name__, logging.WARNING, __file__, 0, message, None, None)
        message = JsonFormatter().format(record)
    print(message, file=sys.stderr)
