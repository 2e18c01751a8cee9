"""A SQLite database as the store keeps it: its connections' settings and its schema, step by
step, which every start brings up to date once."""

import sqlite3
import time

from plantstore.stores.sql import keys_of_urls, steps_to_take, tag_key

#: Seconds between attempts to switch a new database to its write-ahead log.
_SWITCH_RETRY_SECONDS = 0.005


def damaged_or_out_of_reach(ex: sqlite3.Error) -> bool:
    """Whether `ex` says the database cannot serve (its file or disk), rather than a bug.

    `OperationalError`: locked, full, unwritable; `DatabaseError` itself: damaged ("database disk
    image is malformed", "file is not a database"). Its other kinds (a constraint, a misused
    statement) are the code's mistakes.
    """
    return type(ex) in (sqlite3.OperationalError, sqlite3.DatabaseError)


def transient(ex: sqlite3.Error) -> bool:
    """Whether `ex` is a lock another connection holds, which waiting may free."""
    # The primary result code, the low byte of an extended one (SQLITE_BUSY_RECOVERY, ...).
    return (ex.sqlite_errorcode & 0xFF) in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)


def set_up(connection: sqlite3.Connection, busy_timeout: float) -> None:
    """Make the database write ahead to a log and the connection sync every commit."""
    # Readers never wait for the writer, and a commit appends to the log instead of rewriting.
    # Switching a new database needs an exclusive lock, and to processes that try at the same
    # moment SQLite answers busy at once, without waiting: so wait here.
    deadline = time.monotonic() + busy_timeout
    while True:
        try:
            connection.execute("PRAGMA journal_mode = WAL")
            break
        except sqlite3.OperationalError as ex:
            if ex.sqlite_errorcode != sqlite3.SQLITE_BUSY or time.monotonic() > deadline:
                raise
            time.sleep(_SWITCH_RETRY_SECONDS)
    # In WAL mode FULL syncs the log at every commit: a plant answered with 200 is on disk.
    # NORMAL would keep the file consistent but could lose the last commits to a power cut.
    connection.execute("PRAGMA synchronous = FULL")


def _create_plants(connection: sqlite3.Connection) -> None:
    """Make the table as 1.0.0 made it: the plant is its JSON document as text."""
    connection.execute(
        "CREATE TABLE IF NOT EXISTS plants (id INTEGER PRIMARY KEY, plant TEXT NOT NULL)"
    )


def _index_tags(connection: sqlite3.Connection) -> None:
    """Keep each plant's tag (`tag_key`) beside it, in an index ordered by tag, then id."""
    connection.execute("ALTER TABLE plants ADD COLUMN tag BLOB")
    plants = connection.execute("SELECT id, plant FROM plants")
    connection.executemany(
        "UPDATE plants SET tag = ? WHERE id = ?",
        ((tag, plant_id) for plant_id, plant in plants if (tag := tag_key(plant)) is not None),
    )
    connection.execute("CREATE INDEX IF NOT EXISTS plants_by_tag ON plants (tag, id)")


def _create_outbox(connection: sqlite3.Connection) -> None:
    """Keep each event for each subscriber's URL until it is delivered or given up."""
    connection.execute(
        "CREATE TABLE IF NOT EXISTS outbox (id INTEGER PRIMARY KEY, webhook_id TEXT NOT NULL, "
        "url TEXT NOT NULL, body BLOB NOT NULL, created_at REAL NOT NULL, "
        "next_attempt_at REAL NOT NULL, attempts INTEGER NOT NULL DEFAULT 0)"
    )
    connection.execute("CREATE INDEX IF NOT EXISTS outbox_due ON outbox (url, next_attempt_at, id)")


def _key_subscribers(connection: sqlite3.Connection) -> None:
    """Name each delivery's subscriber by its key, not by its URL, which may hold a password.

    The column is renamed to say so; its index follows.
    """
    urls = connection.execute("SELECT DISTINCT url FROM outbox").fetchall()
    connection.executemany("UPDATE outbox SET url = ? WHERE url = ?", keys_of_urls(urls))
    connection.execute("ALTER TABLE outbox RENAME COLUMN url TO subscriber")


def _create_feed(connection: sqlite3.Connection) -> None:
    """Keep the feed: each change's event at its position, and how far the feed was pruned.

    AUTOINCREMENT, so that no position is taken twice, even once every event was pruned.
    """
    connection.execute(
        "CREATE TABLE IF NOT EXISTS events (position INTEGER PRIMARY KEY AUTOINCREMENT, "
        "plant_id INTEGER NOT NULL, at REAL NOT NULL, document BLOB NOT NULL)"
    )
    connection.execute("CREATE TABLE IF NOT EXISTS feed (pruned_through INTEGER NOT NULL)")
    connection.execute("INSERT INTO feed (pruned_through) VALUES (0)")


#: The schema, step by step; `PRAGMA user_version` counts the steps a database has taken.
STEPS = (_create_plants, _index_tags, _create_outbox, _key_subscribers, _create_feed)


def migrate(connection: sqlite3.Connection, path: str) -> None:
    """Take the schema steps the database lacks, once, whoever else starts at the same time.

    The version is read first without a lock, so an up-to-date database is not written to.
    """
    database = f"SQLite {path}"
    (version,) = connection.execute("PRAGMA user_version").fetchone()
    if not steps_to_take(STEPS, version, database):
        return
    # The write lock, held to the commit: another process migrating makes this one wait.
    connection.execute("BEGIN IMMEDIATE")
    with connection:
        (version,) = connection.execute("PRAGMA user_version").fetchone()
        steps = steps_to_take(STEPS, version, database)
        for step in steps:
            step(connection)
        if steps:
            connection.execute(f"PRAGMA user_version = {len(STEPS)}")
