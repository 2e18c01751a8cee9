"""The real `gunicorn -c gunicorn.conf.py`, pinned to one CPU, as the tests start it."""

import tempfile
from itertools import islice
from pathlib import Path

from bench.environs import TOKEN
from bench.load import Workload
from tests import gunicorn_server
from tests.gunicorn_server import ROOT

__all__ = ["ROOT", "WARM_UP_REQUESTS", "Server", "server_environ"]

#: Requests a server is warmed up with, unless told otherwise.
WARM_UP_REQUESTS = 200


def server_environ(**overrides: str) -> dict[str, str]:
    """The environment minus the service's own settings, with the bench's token."""
    return gunicorn_server.server_environ(PLANTSTORE_TOKENS=TOKEN, **overrides)


class Server(gunicorn_server.GunicornServer):
    """The tests' gunicorn, on `cpu`, its access log thrown away and its error log in a file.

    `app` (e.g. `bench.floor:app`) replaces the file's `wsgi_app`: gunicorn takes a positional
    app over the setting, and keeps every other setting. The socket listens before gunicorn
    starts, so the first request waits in the backlog until a worker takes it: `warm_up`
    doubles as the readiness check, however long the app takes to load.
    """

    def __init__(self, cpu: int | None, environ: dict[str, str], *args: str) -> None:
        self._logs = tempfile.TemporaryDirectory()
        super().__init__(
            environ, "--access-logfile=/dev/null", *args, cpu=cpu, log_dir=Path(self._logs.name)
        )

    def warm_up(
        self, workload: Workload, requests: int = WARM_UP_REQUESTS, timeout: float = 600
    ) -> None:
        """Send the first `requests` of `workload` one by one and check each is 200."""
        connection = self.connect(timeout)
        try:
            for method, path, body, headers in islice(workload.requests(), requests):
                connection.request(method, path, body, headers)
                response = connection.getresponse()
                response.read()
                if response.status != 200:
                    raise RuntimeError(f"warm-up {method} {path} answered {response.status}")
        except (OSError, RuntimeError) as ex:
            raise RuntimeError(f"gunicorn did not serve: {ex}\n{self.stop()[1]}") from None
        finally:
            connection.close()

    def stop(self) -> tuple[str, str]:
        """Stop once, gracefully; give back what gunicorn wrote (stdout, stderr)."""
        if self._logs is None:
            return "", ""
        try:
            return super().stop()
        finally:
            self._logs.cleanup()
            self._logs = None

    def __enter__(self) -> "Server":
        return self

    def __exit__(self, *exc_info) -> None:
        self.stop()
