"""A throwaway PostgreSQL cluster on loopback, made and run by the tests themselves.

`initdb` and `postgres` refuse to run as root, and CI runs as root: there they run as the
`postgres` user that Debian's package creates, in a directory that user owns.
"""

import glob
import os
import shutil
import signal
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

#: An existing server to test against instead, as a libpq URL of a database from which the
#: tests may create and drop databases of their own.
EXTERNAL_URL_VARIABLE = "PLANTSTORE_TEST_POSTGRES_URL"
USER = "plantstore"


def find_bindir() -> Path | None:
    """The directory of `initdb` and `pg_ctl`: pg_config's, Debian's, or on the PATH."""
    candidates = []
    if pg_config := shutil.which("pg_config"):
        bindir = subprocess.run([pg_config, "--bindir"], capture_output=True, text=True)
        candidates.append(bindir.stdout.strip())
    candidates += sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True)
    if initdb := shutil.which("initdb"):
        candidates.append(str(Path(initdb).parent))
    for candidate in candidates:
        if candidate and (Path(candidate) / "initdb").is_file():
            return Path(candidate)
    return None


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class PostgresServer:
    """A cluster of its own in a temporary directory, listening on 127.0.0.1 only.

    It runs with `fsync` off, as tests need no disk to survive them; a `durable` one keeps
    `fsync` and `synchronous_commit` on, as a deployed server does, for the benchmark to
    measure commits that wait for the disk. With `statements`, it loads pg_stat_statements
    (`shared_preload_libraries`), for the benchmark to count the statements it runs.
    """

    def __init__(self, bindir: Path, durable: bool = False, statements: bool = False) -> None:
        self._bindir = bindir
        self._durable = durable
        self._statements = statements
        self._directory = Path(tempfile.mkdtemp(prefix="plantstore-postgres-"))
        self._as_owner: list[str] = []
        if os.geteuid() == 0:
            shutil.chown(self._directory, "postgres", "postgres")
            self._as_owner = ["runuser", "-u", "postgres", "--"]
        self._data = self._directory / "data"
        self.log = self._directory / "postgres.log"
        self.port = _free_port()
        self._run("initdb", "-D", self._data, "-U", USER, "-A", "trust", "-E", "UTF8", "--no-sync")
        self.start()

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://{USER}@127.0.0.1:{self.port}/{database}"

    def start(self) -> None:
        """Start and wait until it accepts connections (`pg_ctl -w`)."""
        options = (
            f"-c listen_addresses=127.0.0.1 -p {self.port} -c unix_socket_directories='' "
            "-c max_connections=200 "
            # Named either way, so that no configuration file decides it.
            + ("-c fsync=on -c synchronous_commit=on" if self._durable else "-c fsync=off")
            + (" -c shared_preload_libraries=pg_stat_statements" if self._statements else "")
        )
        self._run("pg_ctl", "start", "-w", "-D", self._data, "-l", self.log, "-o", options)

    @property
    def postmaster_pid(self) -> int:
        """The pid of the running server's first process, the parent of all the others."""
        return int((self._data / "postmaster.pid").read_text().split()[0])

    def stop(self) -> None:
        """Stop at once, ending every session, and wait until it is down."""
        self._run("pg_ctl", "stop", "-w", "-m", "fast", "-D", self._data)

    @contextmanager
    def frozen(self) -> Iterator[None]:
        """Stop every process of this cluster (SIGSTOP), as a hung server would be, until the
        block ends; its connections stay open, and nothing answers on them.
        """
        postmaster = self.postmaster_pid
        os.kill(postmaster, signal.SIGSTOP)
        # Stopped, it forks no more backends: the list is complete.
        children = Path(f"/proc/{postmaster}/task/{postmaster}/children").read_text().split()
        processes = [postmaster, *map(int, children)]
        try:
            for pid in processes[1:]:
                os.kill(pid, signal.SIGSTOP)
            yield
        finally:
            for pid in processes:
                os.kill(pid, signal.SIGCONT)

    def remove(self) -> None:
        """Stop it if a test left it running, and remove it."""
        if (self._data / "postmaster.pid").exists():
            self.stop()
        shutil.rmtree(self._directory)

    def _run(self, program: str, *args) -> None:
        command = [*self._as_owner, self._bindir / program, *map(str, args)]
        done = subprocess.run(
            command, cwd=self._directory, capture_output=True, text=True, timeout=120
        )
        if done.returncode != 0:
            raise RuntimeError(f"{program} failed ({done.returncode}): {done.stderr.strip()}")
