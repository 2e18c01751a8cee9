"""A throwaway PostgreSQL cluster for the loopback parts, started by the bench itself.

It is the tests' cluster (tests/postgres_server.py: loopback only, run as the `postgres` user
when root), started while this process is pinned to the server's CPU, so that PostgreSQL's
processes share that CPU with gunicorn and leave the other to the load generator. Like the
tests', it runs with `fsync` off: its creates do not wait for the disk, unlike SQLite's.
"""

import importlib.util
from collections.abc import Iterator
from contextlib import contextmanager

from bench.loopback import pinned
from tests.postgres_server import PostgresServer, find_bindir


def unavailable() -> str | None:
    """Why no cluster can be started here, or None when one can."""
    if importlib.util.find_spec("psycopg") is None:
        return "psycopg is not installed (pip install -e '.[postgres]')"
    if find_bindir() is None:
        return (
            "no PostgreSQL server binaries (pg_config --bindir, /usr/lib/postgresql/*/bin, PATH);"
            " Debian's postgresql package has them"
        )
    return None


@contextmanager
def cluster(cpu: int | None) -> Iterator[PostgresServer]:
    with pinned(cpu):
        server = PostgresServer(find_bindir())
    try:
        yield server
    finally:
        server.remove()


def create_database(server: PostgresServer, name: str) -> str:
    """Create an empty database on `server`; give its URL."""
    # Imported here, as plantstore.stores does: the base install has no psycopg.
    import psycopg
    from psycopg import sql

    with psycopg.connect(server.url(), autocommit=True) as connection:
        connection.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    return server.url(name)
