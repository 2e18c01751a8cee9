"""urllib3 connections that read each answer by the request's deadline, however it trickles.

A socket's timeout bounds each read alone, and urllib3's `Timeout(total=...)` only sets it
once, before the answer is read: a server sending a byte a second holds the request for as
long as it likes. Here each read of the answer, of its status line and headers as of its
body, gets what is left of the request's total time, so that the request ends when it runs
out.
"""

import http.client
import io
import socket
import time
from functools import partial

import urllib3
from urllib3.connection import HTTPConnection, HTTPSConnection


def pool_manager(num_pools: int, maxsize: int) -> urllib3.PoolManager:
    """A `urllib3.PoolManager` of such connections, http and https alike.

    Requests through it must give a `urllib3.Timeout` with a `total`: its deadline.
    """
    manager = urllib3.PoolManager(num_pools=num_pools, maxsize=maxsize)
    manager.pool_classes_by_scheme = {"http": _HTTPPool, "https": _HTTPSPool}
    return manager


class _ReadByDeadline:
    """Reads the answer by the deadline that urllib3's timeout sets for it.

    Before it reads an answer, urllib3 sets the connection's `timeout` to what the request
    has left of its total time.
    """

    def getresponse(self):
        self.response_class = partial(_Response, deadline=time.monotonic() + self.timeout)
        return super().getresponse()


class _HTTPConnection(_ReadByDeadline, HTTPConnection):
    pass


class _HTTPSConnection(_ReadByDeadline, HTTPSConnection):
    pass


class _HTTPPool(urllib3.HTTPConnectionPool):
    ConnectionCls = _HTTPConnection


class _HTTPSPool(urllib3.HTTPSConnectionPool):
    ConnectionCls = _HTTPSConnection


class _Response(http.client.HTTPResponse):
    """`http.client`'s answer, read from the socket by `deadline` (as `time.monotonic()`)."""

    def __init__(self, sock: socket.socket, *args, deadline: float, **kwargs) -> None:
        super().__init__(sock, *args, **kwargs)
        # The reader made above, with no deadline, closes; the socket stays open.
        self.fp.close()
        self.fp = io.BufferedReader(_SocketReader(sock, deadline))


class _SocketReader(socket.SocketIO):
    """What `socket.makefile("rb")` reads through, each read given the time left."""

    def __init__(self, sock: socket.socket, deadline: float) -> None:
        super().__init__(sock, "rb")
        self._deadline = deadline

    def readinto(self, buffer) -> int | None:
        left = self._deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("timed out")
        self._sock.settimeout(left)
        return super().readinto(buffer)
