"""The PostgreSQL fixtures of every test run, the bench's tests' too: one cluster a run (or the
server `PLANTSTORE_TEST_POSTGRES_URL` names), a schema of its own for each test, databases or a
cluster of a test's own. setup.cfg loads this module as a pytest plugin (`-p`), so that both
suites share the one cluster; it is apart from postgres_server.py, which the bench runs without
pytest installed.
"""

import os
import uuid
from urllib.parse import parse_qsl, quote, urlencode, urlsplit

import psycopg
import pytest
from psycopg import sql

from plantstore.testing.postgres_server import EXTERNAL_URL_VARIABLE, PostgresServer, find_bindir


@pytest.fixture(scope="session")
def postgres_bindir():
    bindir = find_bindir()
    if bindir is None:
        pytest.skip(
            "no PostgreSQL server binaries found (pg_config --bindir, /usr/lib/postgresql/*/bin, "
            "PATH): install Debian's postgresql package, or name a server in "
            f"{EXTERNAL_URL_VARIABLE}"
        )
    return bindir


@pytest.fixture(scope="session")
def postgres_server_url(request):
    """A URL of a database on a server where the tests may create databases of their own."""
    external = os.environ.get(EXTERNAL_URL_VARIABLE)
    if external:
        yield external
        return
    server = PostgresServer(request.getfixturevalue("postgres_bindir"))
    yield server.url()
    server.remove()


@pytest.fixture(scope="session")
def postgres_schemas_url(postgres_server_url):
    """A URL of the one database that every test's schema (`postgres_url`) is made in."""
    name = f"plantstore_test_{uuid.uuid4().hex}"
    with psycopg.connect(postgres_server_url, autocommit=True) as connection:
        connection.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    yield urlsplit(postgres_server_url)._replace(path=f"/{name}").geturl()
    with psycopg.connect(postgres_server_url, autocommit=True) as connection:
        connection.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(name)))


@pytest.fixture
def postgres_url(postgres_schemas_url):
    """A URL of a fresh, empty schema of the test's own, dropped after the test.

    A schema, not a database: making a database copies a template, a few tenths of a second
    for each of hundreds of tests, where a schema takes a millisecond. The URL puts the schema
    alone on the `search_path`, so that whatever the store makes and reads is in it, and names
    it as the sessions' `application_name`, by which the sessions left open are ended.
    """
    name = f"test_{uuid.uuid4().hex}"
    with psycopg.connect(postgres_schemas_url, autocommit=True) as connection:
        connection.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(name)))
    parts = urlsplit(postgres_schemas_url)
    query = [
        *parse_qsl(parts.query),
        ("options", f"-csearch_path={name}"),
        ("application_name", name),
    ]
    yield parts._replace(query=urlencode(query, quote_via=quote)).geturl()
    with psycopg.connect(postgres_schemas_url, autocommit=True) as connection:
        connection.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = %s",
            (name,),
        )
        connection.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(name)))


class PostgresDatabases:
    """Databases of a test's own on a server, each named first and made when the test says."""

    def __init__(self, server_url: str) -> None:
        self._server_url = server_url
        self._names: list[str] = []

    def name(self) -> str:
        """The URL of a database that is not made yet."""
        self._names.append(f"plantstore_test_{uuid.uuid4().hex}")
        return urlsplit(self._server_url)._replace(path=f"/{self._names[-1]}").geturl()

    def make(self, url: str, encoding: str) -> None:
        """Make the database `url` names, in `encoding`, under the C locale, which takes any
        encoding (initdb makes SQL_ASCII under it, where LANG=C)."""
        with psycopg.connect(self._server_url, autocommit=True) as connection:
            connection.execute(
                sql.SQL(
                    "CREATE DATABASE {} ENCODING {} TEMPLATE template0 LC_COLLATE 'C' LC_CTYPE 'C'"
                ).format(sql.Identifier(urlsplit(url).path[1:]), sql.Literal(encoding))
            )

    def drop(self) -> None:
        with psycopg.connect(self._server_url, autocommit=True) as connection:
            for name in self._names:
                connection.execute(
                    sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
                )


@pytest.fixture
def postgres_databases(postgres_server_url):
    made = PostgresDatabases(postgres_server_url)
    yield made
    made.drop()


@pytest.fixture(params=["SQL_ASCII", "LATIN1"])
def not_utf8_postgres(request, postgres_databases):
    """The URL of an empty database that is not UTF8, and its encoding."""
    url = postgres_databases.name()
    postgres_databases.make(url, request.param)
    return url, request.param


@pytest.fixture
def postgres_cluster(postgres_bindir):
    """A cluster of the test's own, which it may stop and start."""
    server = PostgresServer(postgres_bindir)
    yield server
    server.remove()
