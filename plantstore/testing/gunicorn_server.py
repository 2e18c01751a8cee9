"""Run the real `gunicorn -c gunicorn.conf.py` (or `plantstore serve`) on a socket the caller
owns: the tests' servers, and the bench's."""

import contextlib
import http.client
import os
import re
import select
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

#: The checkout: gunicorn runs its `gunicorn.conf.py`, from there.
ROOT = Path(__file__).resolve().parents[2]
GUNICORN = [sys.executable, "-m", "gunicorn", "-c", "gunicorn.conf.py"]
#: The `plantstore` command that `pip install` put beside this Python.
PLANTSTORE = str(Path(sys.executable).parent / "plantstore")
#: What the service, with its default PLANTSTORE_MAX_BODY_BYTES, answers a body over it; so
#: does the nginx site in front of it.
TOO_LARGE = {"error": 413, "message": "The body may hold at most 65536 bytes."}


class GunicornServer:
    """gunicorn serving a listening socket made here and passed as `fd://`.

    The socket listens before gunicorn starts, so a request sent at once waits in the backlog
    until a worker accepts it: there is nothing to poll and no port to race for. It is a
    loopback TCP socket on `host` (127.0.0.1 unless told; 127.0.0.2 and on stand for other
    hosts) and `port` (a free one unless told), or a unix socket at `unix_path` (as a reverse
    proxy would use).

    gunicorn's output comes back from `stop()`; with `log_dir` it goes to `access.log` and
    `error.log` there instead of a pipe, for runs long enough to fill a pipe. With `cpu`, the
    server runs on that CPU alone (the benchmark's load generator takes the other). `command`
    runs in `cwd`: `gunicorn -c gunicorn.conf.py` from the project's root by default. The
    master and its workers are a process group of their own, which `kill()` ends whole.
    """

    def __init__(
        self,
        environ: dict[str, str],
        *args: str,
        host: str = "127.0.0.1",
        port: int = 0,
        unix_path: Path | None = None,
        log_dir: Path | None = None,
        cpu: int | None = None,
        command: tuple[str, ...] = tuple(GUNICORN),
        cwd: Path = ROOT,
    ) -> None:
        self.host = host
        if unix_path is None:
            self._socket = socket.create_server((host, port), backlog=1024)
            self.port = self._socket.getsockname()[1]
        else:
            self._socket = socket.socket(socket.AF_UNIX)
            self._socket.bind(str(unix_path))
            self._socket.listen(1024)
        self._log_dir = log_dir
        self._stderr_read = ""
        fd = self._socket.fileno()
        with contextlib.ExitStack() as files:
            stdout = stderr = subprocess.PIPE
            if log_dir:
                stdout = files.enter_context(open(log_dir / "access.log", "w"))
                stderr = files.enter_context(open(log_dir / "error.log", "w"))
            self._process = subprocess.Popen(
                [*command, f"--bind=fd://{fd}", *args],
                cwd=cwd,
                env=environ,
                pass_fds=[fd],
                stdout=stdout,
                stderr=stderr,
                text=True,
                process_group=0,
                preexec_fn=None if cpu is None else lambda: os.sched_setaffinity(0, {cpu}),
            )

    @property
    def pid(self) -> int:
        return self._process.pid

    def worker_pids(self) -> list[int]:
        """The master's children: its workers, as the kernel lists them."""
        children = Path(f"/proc/{self.pid}/task/{self.pid}/children").read_text()
        return [int(pid) for pid in children.split()]

    def kill(self) -> None:
        """SIGKILL the master and every worker at once, as `kill -9 -PGID` does: none of them
        answers, logs or forks again, as after a crash of the whole service.

        Return once every one of them has exited, its files closed: then nothing of gunicorn
        holds the socket, and after `stop()` its port is free for a server started again.
        """
        # A pidfd reads as ready once its process has exited.
        exits = []
        for pid in [self.pid, *self.worker_pids()]:
            with contextlib.suppress(ProcessLookupError):
                exits.append(os.pidfd_open(pid))
        try:
            os.killpg(self.pid, signal.SIGKILL)
            for descriptor in exits:
                exited, _, _ = select.select([descriptor], [], [], 30)
                assert exited, "a gunicorn process outlived SIGKILL by 30 s"
        finally:
            for descriptor in exits:
                os.close(descriptor)

    def connect(self, timeout: float = 30) -> http.client.HTTPConnection:
        return http.client.HTTPConnection(self.host, self.port, timeout=timeout)

    def request(self, method, path, body=None, headers=None) -> tuple[int, dict, bytes]:
        return send(self.connect(), method, path, body, headers)

    def wait_for_stderr(self, pattern: str, timeout: float = 30, count: int = 1) -> re.Match:
        """Read gunicorn's stderr until `pattern` matches in it `count` times; give the last
        match; fail after `timeout` seconds.

        What is read here is given back by `stop()` as well.
        """
        deadline = time.monotonic() + timeout
        descriptor = self._process.stderr.fileno()
        while len(found := list(re.finditer(pattern, self._stderr_read))) < count:
            remaining = deadline - time.monotonic()
            readable = remaining > 0 and select.select([descriptor], [], [], remaining)[0]
            chunk = os.read(descriptor, 65536) if readable else b""
            if not chunk:
                raise AssertionError(
                    f"gunicorn wrote nothing matching {pattern!r}:\n{self._stderr_read}"
                )
            self._stderr_read += chunk.decode()
        return found[-1]

    def stop(self) -> tuple[str, str]:
        """Stop gracefully and give back everything gunicorn printed (stdout, stderr)."""
        self._process.send_signal(signal.SIGTERM)
        try:
            stdout, stderr = self._process.communicate(timeout=60)
        finally:
            self._socket.close()
        if self._log_dir:
            return tuple((self._log_dir / name).read_text() for name in ("access.log", "error.log"))
        return stdout, self._stderr_read + stderr


def server_environ(**overrides: str) -> dict[str, str]:
    """The environment minus the service's own settings, so every run has the defaults."""
    environ = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(
            ("PLANTSTORE_", "GUNICORN_", "WEB_CONCURRENCY", "FORWARDED_ALLOW_IPS", "BENCH_")
        )
    }
    environ.update(overrides)
    return environ


def run_to_exit(
    *args: str,
    command: list[str] = GUNICORN,
    cwd: Path = ROOT,
    timeout: float = 60,
    **settings: str,
) -> subprocess.CompletedProcess[str]:
    """Run gunicorn (or another `command`) with `settings` over the defaults, until it exits.

    For a start that must fail, or a command that ends by itself: what it printed is kept.
    """
    return subprocess.run(
        [*command, *args],
        cwd=cwd,
        env=server_environ(**settings),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def send(
    connection: http.client.HTTPConnection, method, path, body=None, headers=None
) -> tuple[int, dict, bytes]:
    """Make one request on `connection` and close it; give the status, headers and body."""
    try:
        connection.request(method, path, body=body, headers=headers or {})
        response = connection.getresponse()
        return response.status, dict(response.getheaders()), response.read()
    finally:
        connection.close()
