"""Run the real `gunicorn -c gunicorn.conf.py` on a loopback socket the test owns."""

import http.client
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GUNICORN = [sys.executable, "-m", "gunicorn", "-c", "gunicorn.conf.py"]


class GunicornServer:
    """gunicorn serving a listening socket made here and passed as `fd://`.

    The socket listens before gunicorn starts, so a request sent at once waits in the backlog
    until a worker accepts it: there is nothing to poll and no port to race for.
    """

    def __init__(self, environ: dict[str, str], *args: str) -> None:
        self._socket = socket.create_server(("127.0.0.1", 0))
        self.port = self._socket.getsockname()[1]
        fd = self._socket.fileno()
        self._process = subprocess.Popen(
            [*GUNICORN, f"--bind=fd://{fd}", *args],
            cwd=ROOT,
            env=environ,
            pass_fds=[fd],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    def connect(self) -> http.client.HTTPConnection:
        return http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)

    def request(self, method, path, body=None, headers=None) -> tuple[int, dict, bytes]:
        connection = self.connect()
        try:
            connection.request(method, path, body=body, headers=headers or {})
            response = connection.getresponse()
            return response.status, dict(response.getheaders()), response.read()
        finally:
            connection.close()

    def read_stderr_line(self) -> str:
        return self._process.stderr.readline()

    def stop(self) -> tuple[str, str]:
        """Stop gracefully and give back everything gunicorn printed (stdout, stderr)."""
        self._process.send_signal(signal.SIGTERM)
        try:
            return self._process.communicate(timeout=60)
        finally:
            self._socket.close()


def server_environ(**overrides: str) -> dict[str, str]:
    environ = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("PLANTSTORE_", "GUNICORN_", "WEB_CONCURRENCY"))
    }
    environ.update(overrides)
    return environ
