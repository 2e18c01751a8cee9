"""The servers measured: the real `gunicorn -c gunicorn.conf.py`, as the tests start it, and
the peer under uvicorn; each pinned to one CPU.
"""

import http.client
import os
import socket
import subprocess
import sys
import tempfile
import time
from itertools import islice
from pathlib import Path
from typing import Self

from bench.environs import TOKEN
from bench.load import Workload
from plantstore.testing import gunicorn_server
from plantstore.testing.gunicorn_server import ROOT

__all__ = ["ROOT", "WARM_UP_REQUESTS", "Peer", "Server", "server_environ"]

#: Requests a server is warmed up with, unless told otherwise.
WARM_UP_REQUESTS = 200


def server_environ(**overrides: str) -> dict[str, str]:
    """The environment minus the service's own settings, with the bench's token in
    `PLANTSTORE_TOKENS`, unless `overrides` name a `PLANTSTORE_TOKENS_FILE`: the token is then
    that file's alone, so that a request's token is found in it.
    """
    tokens = {} if "PLANTSTORE_TOKENS_FILE" in overrides else {"PLANTSTORE_TOKENS": TOKEN}
    return gunicorn_server.server_environ(**tokens, **overrides)


class Listener:
    """A server on a socket that listens before the server starts, so the first request waits
    in the backlog until the server takes it: `warm_up` doubles as the readiness check, however
    long the app takes to load. It stops (`stop`, of the server it is mixed into) at the end of
    its `with` block.
    """

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info) -> None:
        self.stop()

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
            raise RuntimeError(f"the server did not serve: {ex}\n{self.stop()[1]}") from None
        finally:
            connection.close()


class Server(Listener, gunicorn_server.GunicornServer):
    """The tests' gunicorn, on `cpu`, its access log thrown away and its error log in a file.

    `app` (e.g. `bench.floor:app`) replaces the file's `wsgi_app`: gunicorn takes a positional
    app over the setting, and keeps every other setting.
    """

    def __init__(self, cpu: int | None, environ: dict[str, str], *args: str) -> None:
        self._logs = tempfile.TemporaryDirectory()
        super().__init__(
            environ, "--access-logfile=/dev/null", *args, cpu=cpu, log_dir=Path(self._logs.name)
        )

    def stop(self) -> tuple[str, str]:
        """Stop once, gracefully; give back what gunicorn wrote (stdout, stderr)."""
        if self._logs is None:
            return "", ""
        try:
            return super().stop()
        finally:
            self._logs.cleanup()
            self._logs = None


class Peer(Listener):
    """The peer (`bench.peer:app`) under uvicorn as people run it for speed, on `cpu`.

    One worker, uvloop and httptools (uvicorn[standard]'s), its access log on (uvicorn's
    default) and thrown away as the service's is: it goes to stdout, here /dev/null. uvicorn
    binds a port of its own, as it is run (with `--fd`, it takes the socket for a unix one and
    leaves Nagle's algorithm on, which delays every answer): the port is one free just before,
    and the peer is ready once it accepts a connection there.
    """

    def __init__(self, cpu: int | None, timeout: float = 60) -> None:
        with socket.create_server(("127.0.0.1", 0)) as probe:
            self.port = probe.getsockname()[1]
        self._logs = tempfile.TemporaryDirectory()
        self._error_log = Path(self._logs.name) / "error.log"
        with self._error_log.open("w") as errors:
            self._process = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "uvicorn",
                    "--host=127.0.0.1",
                    f"--port={self.port}",
                    "--workers=1",
                    "--loop=uvloop",
                    "--http=httptools",
                    "bench.peer:app",
                ],
                cwd=ROOT,
                env=server_environ(),
                stdout=subprocess.DEVNULL,
                stderr=errors,
                process_group=0,
                preexec_fn=None if cpu is None else lambda: os.sched_setaffinity(0, {cpu}),
            )
        self._wait_until_ready(timeout)

    def _wait_until_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while self._process.poll() is None and time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port)).close()
                return
            except ConnectionRefusedError:
                time.sleep(0.05)
        raise RuntimeError(f"uvicorn did not listen on {self.port}:\n{self.stop()[1]}")

    @property
    def pid(self) -> int:
        return self._process.pid

    def connect(self, timeout: float = 30) -> http.client.HTTPConnection:
        return http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)

    def stop(self) -> tuple[str, str]:
        """Stop once, gracefully; give back what uvicorn wrote to stderr (stdout is dropped)."""
        if self._logs is None:
            return "", ""
        self._process.terminate()
        try:
            self._process.wait(timeout=60)
            return "", self._error_log.read_text()
        finally:
            self._logs.cleanup()
            self._logs = None
