"""Counts that noise cannot move: what a request makes the service and PostgreSQL do.

On a busy machine requests/s and latencies move with whatever else runs; what a request costs
in CPU time, transactions, statements and round trips does not. Over each counted run the bench
reads, before and after:

- the service's CPU: utime + stime of the gunicorn master's children, its workers
  (/proc/PID/stat);
- PostgreSQL's CPU: the same of every process of the cluster, the postmaster and its children;
- transactions: `xact_commit` of `pg_stat_database`, for the service's database;
- statements: the `calls` of pg_stat_statements in that database, summed;
- round trips: the TCP segments carrying data that the service's connections sent to the
  cluster's port, `data_segs_out` of `ss -tinpH`, summed over the connections its workers hold.

CPU time is counted for a family of processes, a parent and its children, from the parent's
`cutime` + `cstime` (the children it reaped) and each living child's own: a worker or backend
that ended during the run still counts its share, and one forked during the run counts all it
did. A connection opened during the run counts every segment it sent; one closed during the run
is left out, with what it sent (`Tally.closed` says how many): the pool keeps its connections
open, so a run that answered as it should closes none.

PostgreSQL's backends report their transactions to `pg_stat_database` at most once a second
while busy, and the rest once idle, up to `REPORTED_WITHIN` seconds later: a run's are read
that long after it ended, before anything else is done on its server (`Counter.settle`).
The bench reads over a connection of its own to the `postgres` database, counted in neither.
"""

import os
import re
import subprocess
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from pathlib import Path

from bench.load import LoadResult
from bench.server import Server
from plantstore.testing.postgres_server import PostgresServer

#: Seconds within which a PostgreSQL backend has reported its transactions once it is idle: its
#: `PGSTAT_IDLE_INTERVAL` (10 s), and a margin.
REPORTED_WITHIN = 11
TICKS_A_SECOND = os.sysconf("SC_CLK_TCK")
_SEGMENTS = re.compile(r"\bdata_segs_out:(\d+)")
_PID = re.compile(r"\bpid=(\d+)")


def cpu_ticks(stat: str, reaped: bool = False) -> int:
    """The CPU time of a /proc/PID/stat line, in clock ticks: utime + stime, and with `reaped`,
    also cutime + cstime, the time of the children it waited for.

    The command, the second field, is in parentheses and may hold spaces and parentheses of its
    own: fields are counted from the last `)`. utime to cstime are fields 14 to 17.
    """
    utime, stime, cutime, cstime = map(int, stat.rpartition(")")[2].split()[11:15])
    return utime + stime + (cutime + cstime if reaped else 0)


def family_ticks(parent: int, itself: bool) -> int:
    """The CPU time of `parent`'s children, living and reaped, and with `itself`, its own.

    The children are read first: one that ends meanwhile is in the parent's reaped time.
    """
    children = Path(f"/proc/{parent}/task/{parent}/children").read_text().split()
    ticks = 0
    for child in children:
        try:
            ticks += cpu_ticks(Path(f"/proc/{child}/stat").read_text())
        except (FileNotFoundError, ProcessLookupError):
            continue
    parent_stat = Path(f"/proc/{parent}/stat").read_text()
    return ticks + cpu_ticks(parent_stat, reaped=True) - (0 if itself else cpu_ticks(parent_stat))


def segments_sent(ss: str, pids: Collection[int]) -> dict[str, int]:
    """The data segments each connection held by one of `pids` sent, by its local address, from
    `ss -tinpH state established` (the state column left out); `ss` does not print a count of
    none.
    """
    sent: dict[str, int] = {}
    local = None
    for line in ss.splitlines():
        if not line[:1].isspace():
            # Recv-Q, Send-Q, local address, peer address, the processes that hold it.
            held = any(int(pid) in pids for pid in _PID.findall(line))
            local = line.split()[2] if held else None
            if local:
                sent[local] = 0
        elif local and (found := _SEGMENTS.search(line)):
            sent[local] = int(found[1])
    return sent


@dataclass(frozen=True)
class Reading:
    """The counts at one moment; PostgreSQL's are zero, and empty, for the other stores."""

    service_ticks: int
    postgres_ticks: int = 0
    statements: int = 0
    segments: dict[str, int] = field(default_factory=dict)


@dataclass
class Tally:
    """What the counted runs of one load added up to, and what each request cost on average."""

    requests: int = 0
    service_ticks: int = 0
    postgres_ticks: int = 0
    transactions: int = 0
    statements: int = 0
    segments: int = 0
    #: Connections to PostgreSQL closed during the runs, whose segments are not counted.
    closed: int = 0

    def add(self, requests: int, before: Reading, after: Reading) -> None:
        self.requests += requests
        self.service_ticks += after.service_ticks - before.service_ticks
        self.postgres_ticks += after.postgres_ticks - before.postgres_ticks
        self.statements += after.statements - before.statements
        self.segments += sum(
            count - before.segments.get(local, 0) for local, count in after.segments.items()
        )
        self.closed += len(before.segments.keys() - after.segments.keys())

    def service_us(self) -> float:
        return self._per_request(self.service_ticks) * 1e6 / TICKS_A_SECOND

    def postgres_us(self) -> float:
        return self._per_request(self.postgres_ticks) * 1e6 / TICKS_A_SECOND

    def transactions_each(self) -> float:
        return self._per_request(self.transactions)

    def statements_each(self) -> float:
        return self._per_request(self.statements)

    def round_trips_each(self) -> float:
        return self._per_request(self.segments)

    def _per_request(self, count: int) -> float:
        return count / self.requests if self.requests else float("nan")


class Postgres:
    """The counts of one database of the bench's cluster, and of the cluster's processes."""

    def __init__(self, server: PostgresServer, database: str) -> None:
        # Imported here, as plantstore.stores does: the base install has no psycopg.
        import psycopg

        self._connection = psycopg.connect(server.url(), autocommit=True)
        self._database = database
        self._port = server.port
        self._postmaster = server.postmaster_pid

    def transactions(self) -> int:
        return self._count("SELECT xact_commit FROM pg_stat_database WHERE datname = %s")

    def statements(self) -> int:
        return self._count(
            "SELECT coalesce(sum(calls), 0) FROM pg_stat_statements"
            " JOIN pg_database ON pg_database.oid = dbid WHERE datname = %s"
        )

    def cpu_ticks(self) -> int:
        return family_ticks(self._postmaster, itself=True)

    def segments(self, pids: Collection[int]) -> dict[str, int]:
        """The data segments sent so far by each connection of `pids` to the cluster."""
        done = subprocess.run(
            ["ss", "-tinpH", "state", "established", "dport", "=", f":{self._port}"],
            capture_output=True,
            text=True,
            check=True,
        )
        return segments_sent(done.stdout, pids)

    def close(self) -> None:
        self._connection.close()

    def _count(self, query: str) -> int:
        return int(self._connection.execute(query, (self._database,)).fetchone()[0])


class Counter:
    """Counts what the runs on one server make it do, and with `postgres`, its database."""

    def __init__(self, server: Server, postgres: Postgres | None) -> None:
        self._server = server
        self._postgres = postgres
        self._ended = time.monotonic()
        #: The tally of the last counted run, and the transactions reported before it: its own
        #: are read once PostgreSQL has reported them.
        self._owed: tuple[Tally, int] | None = None

    def run(self, load: Callable[[], LoadResult], tally: Tally | None = None) -> LoadResult:
        """Run `load`; with `tally`, add to it what the run made the server and database do.

        Call `settle` first: anything done on the server since would be counted as the last
        run's transactions.
        """
        if tally is None:
            result = load()
        else:
            transactions = self._reported_transactions()
            before = self._read(cpu_first=False)
            result = load()
            tally.add(result.requests, before, self._read(cpu_first=True))
            if self._postgres is not None:
                self._owed = (tally, transactions)
        self._ended = time.monotonic()
        return result

    def settle(self) -> None:
        """Add to the last counted run's tally its transactions, once PostgreSQL reported them."""
        if self._owed is not None:
            tally, before = self._owed
            self._owed = None
            tally.transactions += self._reported_transactions() - before

    def _reported_transactions(self) -> int:
        """The transactions of the database, once every backend reported those of the last run."""
        if self._postgres is None:
            return 0
        time.sleep(max(0.0, self._ended + REPORTED_WITHIN - time.monotonic()))
        return self._postgres.transactions()

    def _read(self, cpu_first: bool) -> Reading:
        """The counts now; the CPU times read first after a run and last before one, so that
        the bench's own reads fall outside the run's CPU time.
        """
        if self._postgres is None:
            return Reading(family_ticks(self._server.pid, itself=False))
        if cpu_first:
            cpu = self._cpu_ticks()
        statements = self._postgres.statements()
        segments = self._postgres.segments(self._server.worker_pids())
        if not cpu_first:
            cpu = self._cpu_ticks()
        return Reading(*cpu, statements, segments)

    def _cpu_ticks(self) -> tuple[int, int]:
        """The CPU time of the service's workers, and of the cluster's processes."""
        return family_ticks(self._server.pid, itself=False), self._postgres.cpu_ticks()
