import contextlib
import os
import subprocess
import uuid
from urllib.parse import parse_qsl, quote, urlencode, urlsplit

import falcon.testing
import hypothesis
import psycopg
import pytest
from psycopg import sql

from plantstore.app import create_app
from plantstore.config import Config
from plantstore.runtime import Runtime
from plantstore.stores import open_store
from plantstore.stores.memory import MemoryStore
from tests.postgres_server import EXTERNAL_URL_VARIABLE, PostgresServer, find_bindir
from tests.settled import settled
from tests.webhook_receiver import WebhookReceiver

TOKEN = "test-token-1"
SECOND_TOKEN = "test-token-2"


@pytest.fixture
def config():
    return Config(tokens=frozenset({TOKEN, SECOND_TOKEN}), max_body_bytes=4096)


@pytest.fixture
def store():
    return MemoryStore()


@pytest.fixture
def app(config, store):
    return create_app(config, store)


@pytest.fixture
def client(app):
    """A client that sends an accepted bearer token with every request."""
    return falcon.testing.TestClient(app, headers={"Authorization": f"Bearer {TOKEN}"})


@pytest.fixture
def anonymous(app):
    """A client that sends no credentials."""
    return falcon.testing.TestClient(app)


@pytest.fixture
def worker_app():
    """Build apps as a gunicorn worker does: on a started `Runtime`, closed when the test ends."""
    with contextlib.ExitStack() as opened:

        def build(config: Config) -> falcon.App:
            runtime = opened.enter_context(Runtime(config))
            return create_app(config, runtime.store)

        yield build


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


@pytest.fixture
def sqlite_url(tmp_path):
    return f"sqlite:///{tmp_path / 'plants.db'}"


@pytest.fixture(params=["a directory", "a path in /proc", "not a database"])
def unusable_sqlite(request, tmp_path):
    """A `PLANTSTORE_STORE` naming a SQLite file that no wait makes usable, and the one line
    that stops a start for it."""
    path = tmp_path / "plants.db"
    reason = "unable to open database file"
    if request.param == "a directory":
        path.mkdir()
    elif request.param == "a path in /proc":
        path = "/proc/plants.db"
    else:
        path.write_text("plants, one a line\n" * 100)
        reason = "file is not a database"
    return f"sqlite:///{path}", (
        "plantstore: PLANTSTORE_STORE must name a SQLite database file that this user can read "
        f"and write, or make: {path}: {reason}"
    )


@pytest.fixture
def small_disk(tmp_path):
    """A tmpfs of 1 MiB, for a test to fill; skipped where this process may not mount one."""
    mountpoint = tmp_path / "disk"
    mountpoint.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=1m", "plantstore-test", mountpoint],
        capture_output=True,
        text=True,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs to fill: {mounted.stderr.strip()}")
    yield mountpoint
    subprocess.run(["umount", "--lazy", mountpoint], check=True)


@pytest.fixture
def immutable(tmp_path):
    """Make files immutable (`chattr +i`, which binds root too) and mutable again after, those
    still there: a test may have made one mutable itself, and a store removed it."""
    made = []

    def make(*paths):
        done = subprocess.run(["chattr", "+i", *paths], capture_output=True, text=True)
        if done.returncode != 0:
            pytest.skip(f"cannot make a file immutable: {done.stderr.strip()}")
        made.extend(paths)

    yield make
    if left := [path for path in made if os.path.exists(path)]:
        subprocess.run(["chattr", "-i", *left], check=True)


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def store_url(request):
    """The URL of each kind of store in turn, each empty."""
    if request.param == "memory":
        return "memory://"
    return request.getfixturevalue(f"{request.param}_url")


@pytest.fixture
def any_store(store_url):
    """Each kind of store in turn, opened as the service opens it, for property tests too: its
    pool makes no connection while hypothesis draws (`settled`)."""
    opened = settled(open_store(store_url))
    yield opened
    opened.close()


# Property tests draw the same examples on every run, so CI is reproducible, and a bounded number.
hypothesis.settings.register_profile(
    "plantstore", derandomize=True, database=None, max_examples=200, deadline=None
)
hypothesis.settings.load_profile("plantstore")


_FIGURES: list[str] = []


@pytest.fixture(scope="session")
def note_figure():
    """Let a test note a figure it measured; they are printed together when the run ends."""
    return _FIGURES.append


def pytest_terminal_summary(terminalreporter):
    if _FIGURES:
        terminalreporter.section("figures of this run")
        for figure in _FIGURES:
            terminalreporter.write_line(figure)


@pytest.fixture
def browser(tmp_path):
    """A fresh headless Chromium (tests/browser.py; selenium comes with the `outside` extra)."""
    from tests.browser import chromium

    with chromium(tmp_path / "profile") as driver:
        yield driver


@pytest.fixture
def receiver():
    """A subscriber on loopback that verifies every delivery it is sent."""
    with WebhookReceiver() as opened:
        yield opened
