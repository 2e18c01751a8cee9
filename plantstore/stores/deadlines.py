"""Holding PostgreSQL calls to a deadline when the server stops answering but keeps its sessions.

The failure: a server that is stopped (SIGSTOP), hung, or cut off by a network that drops
its packets keeps every TCP connection open and never answers on it. psycopg then waits for
ever: it has no client-side timeout for a query, `statement_timeout` is the server's to
enforce, a cancel request needs the server to answer too, and psycopg_pool's timeout bounds
only the wait for a connection, not what is done on it (its check of a connection included).

So a connection in use is shut at its deadline: its socket is shut down (not closed, the
descriptor stays libpq's), the blocked read fails at once, libpq marks the connection bad,
and the pool throws it away.
"""

import math
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress

import psycopg


class Deadlines:
    """Shuts the socket of a connection still in use at its deadline.

    One thread watches every connection held, waking at the earliest deadline: none is
    started for each call.
    """

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._due: dict[psycopg.Connection, float] = {}
        self._shut: set[psycopg.Connection] = set()
        self._wake_at = math.inf
        self._closed = False
        threading.Thread(target=self._watch, name="plantstore-deadlines", daemon=True).start()

    @contextmanager
    def bound(self, connection: psycopg.Connection, deadline: float) -> Iterator[None]:
        """Hold `connection` to `deadline` (`time.monotonic`) while the block runs.

        A connection shut by its deadline is closed when the block ends, so that the pool
        never hands it out again, and whatever the block raised then, psycopg's error or the
        caller's own (a batch's `NothingWritten`), becomes one that says why.
        """
        with self._changed:
            self._due[connection] = deadline
            if deadline < self._wake_at:
                self._changed.notify()
        try:
            yield
        except Exception as ex:
            if self._forget(connection):
                raise psycopg.OperationalError(
                    "no answer in time, so its connection was shut"
                ) from ex
            raise
        finally:
            if self._forget(connection):
                connection.close()

    def close(self) -> None:
        """End the watching thread."""
        with self._changed:
            self._closed = True
            self._changed.notify()

    def _forget(self, connection: psycopg.Connection) -> bool:
        """Stop watching `connection`; tell whether its deadline shut it."""
        with self._changed:
            self._due.pop(connection, None)
            shut = connection in self._shut
            self._shut.discard(connection)
        return shut

    def _watch(self) -> None:
        with self._changed:
            while not self._closed:
                now = time.monotonic()
                for connection, deadline in list(self._due.items()):
                    if deadline <= now:
                        del self._due[connection]
                        self._shut.add(connection)
                        _shut_down(connection)
                self._wake_at = min(self._due.values(), default=math.inf)
                self._changed.wait(self._wake_at - now if self._due else None)


def _shut_down(connection: psycopg.Connection) -> None:
    """End the connection's traffic both ways; its descriptor stays open, and libpq's."""
    with (
        suppress(OSError, psycopg.Error),
        socket.fromfd(connection.fileno(), socket.AF_INET, socket.SOCK_STREAM) as copy,
    ):
        copy.shutdown(socket.SHUT_RDWR)
