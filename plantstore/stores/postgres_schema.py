"""A PostgreSQL database as the store keeps it: how it is connected to, and its schema, step by
step, which the first connection of a start brings up to date, once, whoever starts with it."""

import psycopg

from plantstore.core.stores import StoreUnavailable, StoreUnusable
from plantstore.stores.sql import keys_of_urls, steps_to_take, tag_key

#: What every connection is opened with, besides the URL; 2 s is libpq's shortest timeout.
#: Text goes both ways in UTF-8 whatever `PGCLIENTENCODING` or the URL ask: a plant's name
#: may hold any character.
CONNECT = {"autocommit": True, "connect_timeout": 2, "client_encoding": "UTF8"}
#: Held while the schema changes, so that workers starting together change it once.
_SCHEMA_LOCK = 0x706C616E7473


def _create_plants(connection: psycopg.Connection) -> None:
    """Make the table as 1.0.0 made it.

    `json` keeps the document's exact text (`jsonb` would reorder it and refuse `\\u0000`), so
    what comes back compares byte for byte with what a repeat sends.
    """
    connection.execute(
        "CREATE TABLE IF NOT EXISTS plants (id bigint PRIMARY KEY, plant json NOT NULL)"
    )


def _index_tags(connection: psycopg.Connection) -> None:
    """Keep each plant's tag (`tag_key`) beside it, in an index ordered by tag, then id."""
    connection.execute("ALTER TABLE plants ADD COLUMN IF NOT EXISTS tag bytea")
    # Read on the server's side, a batch at a time: the table may be larger than this memory.
    with connection.cursor(name="plantstore_tags") as plants, connection.cursor() as update:
        plants.execute("SELECT id, plant::text FROM plants")
        while rows := plants.fetchmany(1000):
            update.executemany(
                "UPDATE plants SET tag = %s WHERE id = %s",
                [
                    (tag, plant_id)
                    for plant_id, plant in rows
                    if (tag := tag_key(plant)) is not None
                ],
            )
    connection.execute("CREATE INDEX IF NOT EXISTS plants_by_tag ON plants (tag, id)")


def _create_outbox(connection: psycopg.Connection) -> None:
    """Keep each event for each subscriber's URL until it is delivered or given up."""
    connection.execute(
        "CREATE TABLE IF NOT EXISTS outbox (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, "
        "webhook_id text NOT NULL, url text NOT NULL, body bytea NOT NULL, "
        "created_at double precision NOT NULL, next_attempt_at double precision NOT NULL, "
        "attempts integer NOT NULL DEFAULT 0)"
    )
    connection.execute("CREATE INDEX IF NOT EXISTS outbox_due ON outbox (url, next_attempt_at, id)")


def _key_subscribers(connection: psycopg.Connection) -> None:
    """Name each delivery's subscriber by its key, not by its URL, which may hold a password.

    The column is renamed to say so; its index follows.
    """
    urls = connection.execute("SELECT DISTINCT url FROM outbox").fetchall()
    with connection.cursor() as cursor:
        cursor.executemany("UPDATE outbox SET url = %s WHERE url = %s", keys_of_urls(urls))
    connection.execute("ALTER TABLE outbox RENAME COLUMN url TO subscriber")


def _create_feed(connection: psycopg.Connection) -> None:
    """Keep the feed: each change's event at its position, and how far the feed was pruned.

    A batch's events take positions from its transaction's id (postgres_batch.py), and
    `plantstore_events_in_order` refuses a batch that would put a plant's event before one of
    that plant committed earlier (`events_by_plant` finds them); otherwise it is true, and the
    batch's insert of its events is made on that condition, which PostgreSQL tests once, before
    the first row, as the function reads but writes nothing (`STABLE`). Always by that index: the
    function's query is planned once a session, often while the table is still empty, and a
    plan that then scans the whole table would read every event on every batch as the feed
    grows; so the function turns sequential scans off while it runs (`SET enable_seqscan`).
    """
    connection.execute(
        "CREATE TABLE IF NOT EXISTS events (position bigint PRIMARY KEY, "
        "plant_id bigint NOT NULL, at double precision NOT NULL, document bytea NOT NULL)"
    )
    connection.execute("CREATE INDEX IF NOT EXISTS events_by_plant ON events (plant_id, position)")
    connection.execute("CREATE TABLE IF NOT EXISTS feed (pruned_through bigint NOT NULL)")
    connection.execute("INSERT INTO feed (pruned_through) VALUES (0)")
    connection.execute(
        "CREATE OR REPLACE FUNCTION plantstore_events_in_order(plant_ids bigint[], "
        "first_position bigint) RETURNS boolean LANGUAGE plpgsql STABLE "
        "SET enable_seqscan = off AS $$ BEGIN "
        "IF EXISTS (SELECT 1 FROM events WHERE plant_id = ANY(plant_ids) "
        "AND position >= first_position) THEN RAISE EXCEPTION USING "
        "ERRCODE = 'serialization_failure', MESSAGE = 'a plant of the batch has an event of "
        "a later transaction id: the batch is made again in a new transaction'; "
        "END IF; RETURN true; END $$"
    )


#: The schema, step by step; the one row of `plantstore_schema` counts the steps taken.
STEPS = (_create_plants, _index_tags, _create_outbox, _key_subscribers, _create_feed)


def _version(connection: psycopg.Connection) -> int:
    """Read the schema version: 0 for an empty database or one that 1.0.0 made."""
    if connection.execute("SELECT to_regclass('plantstore_schema')").fetchone()[0] is None:
        return 0
    row = connection.execute("SELECT version FROM plantstore_schema").fetchone()
    return 0 if row is None else row[0]


def migrate(connection: psycopg.Connection) -> None:
    """Take the schema steps the database lacks, once, whoever else starts at the same time.

    The version is read first without the lock: each new connection of the pool comes here,
    and for an up-to-date database that costs two short queries.
    """
    database = f"PostgreSQL database {connection.info.dbname}"
    if not steps_to_take(STEPS, _version(connection), database):
        return
    with connection.transaction():
        connection.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK,))
        # Not `to_regclass` here: it looks in the catalog cache, which waiting for the lock
        # left as it was, and may not see the table that another worker's migration made.
        connection.execute(
            "CREATE TABLE IF NOT EXISTS plantstore_schema (version integer NOT NULL)"
        )
        row = connection.execute("SELECT version FROM plantstore_schema").fetchone()
        steps = steps_to_take(STEPS, 0 if row is None else row[0], database)
        for step in steps:
            step(connection)
        if steps:
            connection.execute("DELETE FROM plantstore_schema")
            connection.execute("INSERT INTO plantstore_schema (version) VALUES (%s)", (len(STEPS),))


def require_utf8(connection: psycopg.Connection) -> None:
    """Refuse a database that cannot keep every character: one that is not UTF8.

    Another encoding (SQL_ASCII, what initdb makes under the C locale; LATIN1) would take a
    plant and fail to give it back, or refuse a name in another script: every such request
    would be a 500. The server tells the database's encoding as the connection opens.

    Raises:
        StoreUnusable: the database's encoding is not UTF8.
    """
    encoding = connection.info.parameter_status("server_encoding")
    if encoding != "UTF8":
        raise StoreUnusable(
            f"PostgreSQL database {connection.info.dbname} has encoding {encoding}, but "
            "plantstore needs UTF8: create the database with ENCODING 'UTF8'"
        )


def prepare(url: str) -> None:
    """Connect once, refuse a database that is not UTF8, and bring its schema up to date.

    Raises:
        StoreUnavailable: the server cannot be reached, or refused the connection: libpq's
            reason (`Connection refused`, an unknown host, a failed authentication, a database
            that does not exist), which names no password.
        StoreUnusable: the database is not UTF8.
        SchemaTooNew: a newer plantstore brought the database to a schema this one does not know.
    """
    try:
        with psycopg.connect(url, **CONNECT) as connection:
            require_utf8(connection)
            migrate(connection)
    except psycopg.OperationalError as ex:
        # libpq's first line says why; the next ones only hint ("Is the server running...").
        reason = " ".join(str(ex).partition("\n")[0].split())
        raise StoreUnavailable(f"PostgreSQL: {reason}") from None
