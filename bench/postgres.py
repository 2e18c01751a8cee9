"""Throwaway PostgreSQL clusters for the loopback parts, started by the bench itself.

They are the tests' clusters (plantstore/testing/postgres_server.py: loopback only, run as the
`postgres` user when root), started while this process is pinned to the server's CPU, so that
PostgreSQL's processes share that CPU with gunicorn and leave the other to the load generator.
The cluster of `loopback` and `loopback-pages` runs with `fsync` off, like the tests': its
creates do not wait for the disk, unlike SQLite's. That of `durable` is a durable one, with
`fsync` and `synchronous_commit` on, as a deployed server runs: its commits wait for the disk;
it counts the statements it runs (pg_stat_statements, created in its `postgres` database), for
the bench to read.
"""

import importlib.util
from collections.abc import Iterator
from contextlib import contextmanager

from bench.loopback import pinned
from plantstore.testing.postgres_server import PostgresServer, find_bindir

#: The settings that make a commit wait for the disk, each `on` in a durable cluster.
DURABILITY = ("fsync", "synchronous_commit")


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
def cluster(cpu: int | None, durable: bool = False) -> Iterator[PostgresServer]:
    with pinned(cpu):
        server = PostgresServer(find_bindir(), durable, statements=durable)
    try:
        if durable:
            import psycopg

            with psycopg.connect(server.url(), autocommit=True) as connection:
                connection.execute("CREATE EXTENSION pg_stat_statements")
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


def durability(url: str) -> dict[str, str]:
    """Each of `DURABILITY` as the server at `url` reports it (`SHOW`)."""
    import psycopg
    from psycopg import sql

    with psycopg.connect(url) as connection:
        return {
            name: connection.execute(sql.SQL("SHOW {}").format(sql.Identifier(name))).fetchone()[0]
            for name in DURABILITY
        }
