"""The app's Falcon request, whose errors reach the log in its format."""

import logging

import falcon

from plantstore.operations.logs import escaped

_falcon_log = logging.getLogger("falcon")


class Request(falcon.Request):
    """Falcon's request, whose `log_error` writes through logging rather than to `wsgi.errors`.

    gunicorn's `wsgi.errors` writes straight to stderr, bypassing the log's format; Falcon
    writes there the traceback of a 500, and the app why a store could not serve.
    """

    def log_error(self, message: str) -> None:
        _falcon_log.error("%s %s: %s", self.method, escaped(self.path), message.rstrip("\n"))
