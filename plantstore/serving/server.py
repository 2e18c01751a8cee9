"""`plantstore serve`: gunicorn's documented custom application, with the service's settings.

Importing this module imports gunicorn, which reads `WEB_CONCURRENCY` and `FORWARDED_ALLOW_IPS`
as it loads: `plantstore.serving.command` checks the environment first.
"""

from gunicorn.app.base import BaseApplication

from plantstore.serving import settings


class Server(BaseApplication):
    """gunicorn with the settings and hooks of `plantstore.serving.settings`, then the flags.

    gunicorn's own flags (`--bind`, `--workers`, ...) override the settings, as with
    `gunicorn -c`. On SIGHUP gunicorn loads this configuration again and replaces the workers.
    """

    def __init__(self, arguments: list[str]) -> None:
        self._arguments = arguments
        super().__init__(prog="plantstore serve")

    def load_config(self) -> None:
        for name, value in vars(settings).items():
            if name in self.cfg.settings:
                self.cfg.set(name, value)
        flags = self.cfg.parser().parse_args(self._arguments)
        for name, value in vars(flags).items():
            if value is not None and name in self.cfg.settings:
                self.cfg.set(name, value)

    def load(self):
        return settings.worker_app()
