"""The real `gunicorn -c gunicorn.conf.py`, pinned to one CPU, on a loopback socket made here."""

import http.client
import os
import signal
import socket
import subprocess
import sys
import tempfile
from itertools import islice
from pathlib import Path

from bench.environs import AUTHORIZED, READER, TOKEN
from bench.load import Workload

ROOT = Path(__file__).resolve().parent.parent


def server_environ(**overrides: str) -> dict[str, str]:
    """The environment minus the service's own settings, so every run has the defaults."""
    environ = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("PLANTSTORE_", "GUNICORN_", "WEB_CONCURRENCY", "BENCH_"))
    }
    environ.update(PLANTSTORE_TOKENS=TOKEN, **overrides)
    return environ


class Server:
    """gunicorn serving a listening socket passed as `fd://`, with its settings file.

    `app` (e.g. `bench.floor:app`) replaces the file's `wsgi_app`: gunicorn takes a positional
    app over the setting, and keeps every other setting. The socket listens before gunicorn
    starts, so the first request waits in the backlog until a worker takes it: `warm_up`
    doubles as the readiness check, however long the app takes to load.
    """

    def __init__(self, cpu: int | None, environ: dict[str, str], *args: str) -> None:
        self._socket = socket.create_server(("127.0.0.1", 0), backlog=1024)
        self.port = self._socket.getsockname()[1]
        fd = self._socket.fileno()
        # Held for the server's life and closed by `stop`; a file, unlike a pipe, never fills up.
        self._stderr = tempfile.TemporaryFile(mode="w+")  # noqa: SIM115
        self._process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "gunicorn",
                "-c",
                "gunicorn.conf.py",
                f"--bind=fd://{fd}",
                *args,
            ],
            cwd=ROOT,
            env=environ,
            pass_fds=[fd],
            stdout=subprocess.DEVNULL,
            stderr=self._stderr,
            preexec_fn=None if cpu is None else lambda: os.sched_setaffinity(0, {cpu}),
        )

    def warm_up(self, workload: Workload, requests: int = 200, timeout: float = 600) -> None:
        """Send the first `requests` of `workload` one by one and check each is 200."""
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            for method, path, body in islice(workload.requests(), requests):
                connection.request(method, path, body, AUTHORIZED if body is not None else READER)
                response = connection.getresponse()
                response.read()
                if response.status != 200:
                    raise RuntimeError(f"warm-up {method} {path} answered {response.status}")
        except (OSError, RuntimeError) as ex:
            raise RuntimeError(f"gunicorn did not serve: {ex}\n{self.stop()}") from None
        finally:
            connection.close()

    def stop(self) -> str:
        """Stop gracefully; give back what gunicorn wrote to stderr."""
        if self._process.poll() is None:
            self._process.send_signal(signal.SIGTERM)
        self._process.wait(timeout=60)
        self._socket.close()
        if self._stderr.closed:
            return ""
        self._stderr.seek(0)
        with self._stderr:
            return self._stderr.read()

    def __enter__(self) -> "Server":
        return self

    def __exit__(self, *exc_info) -> None:
        self.stop()
