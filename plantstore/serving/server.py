"""gunicorn's own application, run with the packaged settings: what `plantstore serve` starts.

Importing this module imports gunicorn, which reads `WEB_CONCURRENCY` and `FORWARDED_ALLOW_IPS`
as it loads: `plantstore.serving.command` checks the environment first.
"""

import sys

from gunicorn.app.wsgiapp import WSGIApplication

SETTINGS = "python:plantstore.serving.settings"


class Server(WSGIApplication):
    """gunicorn's command line application (the one `gunicorn` runs), with `SETTINGS` loaded.

    gunicorn's flags pass through: they override the settings, as with `gunicorn -c`. A
    `SIGHUP` makes gunicorn load its configuration again, from the same arguments.
    """

    def __init__(self, arguments: list[str]) -> None:
        self._arguments = ["--config", SETTINGS, *arguments]
        super().__init__("%(prog)s [OPTIONS]", prog="plantstore serve")

    def load_config(self) -> None:
        # gunicorn parses sys.argv here (its command line, then the config file, the
        # environment's GUNICORN_CMD_ARGS and the flags): show it the serve's arguments.
        argv = sys.argv
        sys.argv = [argv[0], *self._arguments]
        try:
            super().load_config()
        finally:
            sys.argv = argv
