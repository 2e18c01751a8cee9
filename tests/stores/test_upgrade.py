"""Upgrading from 1.0.0: the real gunicorn, three workers, on a database that 1.0.0 made."""

import base64
import contextlib
import json
import re
import sqlite3
import time
from urllib.parse import quote

import orjson
import psycopg
import pytest

from plantstore.config import store_kind
from plantstore.core.events import Event, EventKind, subscriber_key
from plantstore.stores import open_store
from plantstore.stores import postgres_schema as postgres_steps
from plantstore.stores import sqlite_schema as sqlite_steps
from plantstore.testing.gunicorn_server import GunicornServer, run_to_exit, server_environ
from plantstore.testing.webhook_receiver import SECRET

TOKEN = "upgrade-token"
AUTH = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
#: Each test starts gunicorn on the upgraded database: the slow set.
pytestmark = pytest.mark.slow
#: Tags an index must get right, `\u0000` among them, which SQL's JSON functions get wrong.
TAGS = ("red", "", "\u0000", "日本 🌿")


def old_plant(n: int) -> dict:
    """The `n`th plant 1.0.0 kept: every fifth without a tag."""
    name = f"plant {n} \u0000 🌿" if n % 7 == 0 else f"plant {n}"
    return {"name": name} if n % 5 == 0 else {"name": name, "tag": TAGS[n % len(TAGS)]}


#: Ids from one end of int64 to the other, each kept as 1.0.0 kept it: the orjson document.
OLD_PLANTS = {
    **{n * 30_000_000_000_000_017 - 2**62: orjson.dumps(old_plant(n)) for n in range(300)},
    -(2**63): orjson.dumps(old_plant(300)),
    2**63 - 1: orjson.dumps(old_plant(301)),
}
NEW_PLANT = {"name": "ivy", "tag": "red"}
NEW_ID = 1


def make_as_1_0_0_did(store_url: str) -> None:
    """The table 1.0.0 made and nothing more: no version, no tag column, no index."""
    rows = [(plant_id, plant.decode()) for plant_id, plant in OLD_PLANTS.items()]
    if store_kind(store_url) == "sqlite":
        with sqlite3.connect(store_url.removeprefix("sqlite:///")) as connection:
            connection.execute("PRAGMA journal_mode = WAL")
            connection.execute("CREATE TABLE plants (id INTEGER PRIMARY KEY, plant TEXT NOT NULL)")
            connection.executemany("INSERT INTO plants (id, plant) VALUES (?, ?)", rows)
        connection.close()
    else:
        with psycopg.connect(store_url) as connection:
            connection.execute("CREATE TABLE plants (id bigint PRIMARY KEY, plant json NOT NULL)")
            with connection.cursor() as cursor:
                cursor.executemany("INSERT INTO plants (id, plant) VALUES (%s, %s::json)", rows)


def schema_versions(store_url: str) -> list[int]:
    """The schema version the database records: `[n]`, one version, in a migrated one."""
    if store_kind(store_url) == "sqlite":
        with sqlite3.connect(store_url.removeprefix("sqlite:///")) as connection:
            versions = [connection.execute("PRAGMA user_version").fetchone()[0]]
        connection.close()
        return versions
    with psycopg.connect(store_url) as connection:
        return [row[0] for row in connection.execute("SELECT version FROM plantstore_schema")]


def current_version(store_url: str) -> int:
    """The version this code brings a database to: the number of its schema steps."""
    return len((sqlite_steps if store_kind(store_url) == "sqlite" else postgres_steps).STEPS)


def request(server, method, path, body=None) -> tuple[int, dict, bytes]:
    return server.request(method, path, None if body is None else json.dumps(body), AUTH)


def walk(server, query: str) -> list[tuple[int, bytes]]:
    """Every plant the list gives, following `next` to the end, as (id, plant document)."""
    items, target = [], f"/plants?{query}"
    while target:
        status, headers, body = request(server, "GET", target)
        assert status == 200
        items += [(item.pop("id"), orjson.dumps(item)) for item in json.loads(body)]
        link = {name.lower(): value for name, value in headers.items()}.get("link")
        target = link and re.fullmatch(r'<([^>]*)>; rel="next"', link)[1]
        assert len(items) <= len(OLD_PLANTS) + 1, "the list does not end"
    return items


upgraded = pytest.mark.parametrize("store_url", ["sqlite", "postgres"], indirect=True)


@upgraded
def test_every_plant_1_0_0_kept_is_served_by_three_workers_after_the_upgrade(store_url, tmp_path):
    """The schema is brought up to date once, before any worker serves, with no plant lost."""
    make_as_1_0_0_did(store_url)
    server = GunicornServer(
        server_environ(PLANTSTORE_TOKENS=TOKEN, PLANTSTORE_STORE=store_url, WEB_CONCURRENCY="3"),
        log_dir=tmp_path,
    )
    try:
        for plant_id, plant in OLD_PLANTS.items():
            assert request(server, "GET", f"/plants/{plant_id}")[::2] == (200, plant)
        assert walk(server, "limit=64") == sorted(OLD_PLANTS.items())
        for tag in TAGS:
            assert walk(server, f"limit=32&tag={quote(tag)}") == [
                (plant_id, plant)
                for plant_id, plant in sorted(OLD_PLANTS.items())
                if orjson.loads(plant).get("tag") == tag
            ]
        for plant_id, plant in list(OLD_PLANTS.items())[::10]:
            content = orjson.loads(plant)
            assert request(server, "POST", "/plants", {"id": plant_id, **content})[::2] == (
                200,
                plant,
            )
            other = {**content, "name": "other"}
            assert request(server, "POST", "/plants", {"id": plant_id, **other})[0] == 409

        assert request(server, "POST", "/plants", {"id": NEW_ID, **NEW_PLANT})[0] == 200
        assert json.loads(request(server, "GET", f"/plants/{NEW_ID}")[2]) == NEW_PLANT
        assert (NEW_ID, orjson.dumps(NEW_PLANT)) in walk(server, "tag=red&limit=1000")
        old_id = next(iter(OLD_PLANTS))
        for plant_id in (NEW_ID, old_id):
            assert request(server, "DELETE", f"/plants/{plant_id}")[0] == 204
            assert request(server, "GET", f"/plants/{plant_id}")[0] == 404
        assert [plant_id for plant_id, _ in walk(server, "limit=1000")] == sorted(
            set(OLD_PLANTS) - {old_id}
        )
        assert request(server, "POST", "/plants", {"id": old_id, **NEW_PLANT})[0] == 200
    finally:
        _, stderr = server.stop()
    assert "Traceback" not in stderr
    assert stderr.count("Booting worker") == 3
    assert schema_versions(store_url) == [current_version(store_url)]


def make_newer_than_this_code(store_url: str, version: int) -> None:
    """Bring a database that 1.0.0 made to `version`, as a later plantstore would."""
    make_as_1_0_0_did(store_url)
    if store_kind(store_url) == "sqlite":
        with sqlite3.connect(store_url.removeprefix("sqlite:///")) as connection:
            connection.execute(f"PRAGMA user_version = {version}")
        connection.close()
    else:
        with psycopg.connect(store_url) as connection:
            connection.execute("CREATE TABLE plantstore_schema (version integer NOT NULL)")
            connection.execute("INSERT INTO plantstore_schema (version) VALUES (%s)", (version,))


@upgraded
def test_a_database_newer_than_the_code_stops_the_start_with_one_line(store_url):
    """Rather than three workers each failing to boot with a traceback, and the database left
    as the newer plantstore made it.
    """
    newer = current_version(store_url) + 1
    make_newer_than_this_code(store_url, newer)
    result = run_to_exit(
        "--bind=127.0.0.1:0",
        timeout=30,
        PLANTSTORE_TOKENS=TOKEN,
        PLANTSTORE_STORE=store_url,
        WEB_CONCURRENCY="3",
    )
    assert result.returncode != 0
    # Besides gunicorn's own line that it is starting, which comes before the check.
    lines = [line for line in result.stderr.splitlines() if "[INFO] Starting gunicorn" not in line]
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("plantstore: ")
    assert f"schema version {newer}" in lines[0]
    assert schema_versions(store_url) == [newer]


def on_database(store_url: str, statement: str, rows=()) -> list[tuple]:
    """Run `statement` (written with `?`) on the store's database, for each of `rows` if any;
    give what it selects."""
    if store_kind(store_url) == "sqlite":
        path = store_url.removeprefix("sqlite:///")
        with contextlib.closing(sqlite3.connect(path)) as connection, connection:
            if rows:
                connection.executemany(statement, rows)
                return []
            return connection.execute(statement).fetchall()
    with psycopg.connect(store_url) as connection, connection.cursor() as cursor:
        if rows:
            cursor.executemany(statement.replace("?", "%s"), rows)
            return []
        return cursor.execute(statement).fetchall()


@upgraded
def test_events_waiting_for_urls_reach_their_subscribers_after_the_upgrade(
    store_url, receiver, monkeypatch
):
    """The outbox used to keep each delivery's URL, a password in it included: the upgrade
    keeps the subscriber's key instead, and each waiting event still goes to its URL, with
    the URL's user and password as Basic authorization."""
    module = sqlite_steps if store_kind(store_url) == "sqlite" else postgres_steps
    with monkeypatch.context() as old:
        old.setattr(module, "STEPS", module.STEPS[:3])
        open_store(store_url).close()
    urls = [
        receiver.url.replace("http://", "http://user:hunter2@"),
        receiver.url.replace("/hooks", "/other"),
    ]
    events = [Event(n, EventKind.DELETED, n, None, time.time()) for n in (1, 2)]
    on_database(
        store_url,
        "INSERT INTO outbox (webhook_id, url, body, created_at, next_attempt_at) "
        "VALUES (?, ?, ?, ?, ?)",
        [
            (event.id, url, event.webhook_body(), event.at, event.at)
            for event, url in zip(events, urls, strict=True)
        ],
    )
    receiver.hold()
    server = GunicornServer(
        server_environ(
            PLANTSTORE_TOKENS=TOKEN,
            PLANTSTORE_STORE=store_url,
            WEB_CONCURRENCY="2",
            PLANTSTORE_WEBHOOK_URLS=",".join(urls),
            PLANTSTORE_WEBHOOK_SECRET=SECRET,
        )
    )
    try:
        assert receiver.wait_for(lambda got: receiver.attempts == 2, 30)
        waiting = on_database(store_url, "SELECT webhook_id, subscriber FROM outbox ORDER BY id")
        assert waiting == [
            (event.id, subscriber_key(url)) for event, url in zip(events, urls, strict=True)
        ]
        assert "hunter2" not in repr(on_database(store_url, "SELECT * FROM outbox"))
        receiver.release()
        assert receiver.wait_for(lambda got: len(got) == 2, 30)
        deadline = time.monotonic() + 30
        while on_database(store_url, "SELECT id FROM outbox"):  # bounded poll: no sign of it
            assert time.monotonic() < deadline
    finally:
        _, stderr = server.stop()
    basic = base64.b64encode(b"user:hunter2").decode()
    assert {(d.webhook_id, d.path, d.authorization) for d in receiver.deliveries} == {
        (events[0].id, "/hooks", f"Basic {basic}"),
        (events[1].id, "/other", None),
    }
    assert "Traceback" not in stderr
    assert "hunter2" not in stderr
    assert schema_versions(store_url) == [current_version(store_url)]
