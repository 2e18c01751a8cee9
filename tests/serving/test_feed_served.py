"""The feed's waits under the real gunicorn: a graceful stop, or a SIGHUP's replacement of the
workers, ends each wait at once with an empty page, rather than hold the stop for its time."""

import json
import os
import signal
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from plantstore.testing.gunicorn_server import GunicornServer, server_environ

pytestmark = pytest.mark.slow

TOKEN = "feed-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
WAITING = "plantstore_feed_waiting_requests "


def waiting_requests(server: GunicornServer) -> float:
    _, _, body = server.request("GET", "/metrics", headers=AUTH)
    (line,) = [line for line in body.decode().splitlines() if line.startswith(WAITING)]
    return float(line.removeprefix(WAITING))


def wait_in_the_feed(server: GunicornServer, pool: ThreadPoolExecutor):
    """Ask for the events after the head with a 30 s wait; return once the worker waits."""
    _, headers, _ = server.request("GET", "/plants", headers=AUTH)
    after = {name.lower(): value for name, value in headers.items()}["events-after"]
    answer = pool.submit(server.request, "GET", f"/events?after={after}&wait=30", None, AUTH)
    deadline = time.monotonic() + 30
    while waiting_requests(server) < 1:  # bounded poll of the worker's own gauge
        assert time.monotonic() < deadline, "no request ever waited"
        assert not answer.done(), answer.result()
    return answer


def test_a_graceful_stop_ends_the_waits_with_an_empty_page():
    server = GunicornServer(server_environ(PLANTSTORE_TOKENS=TOKEN))
    with ThreadPoolExecutor(1) as pool:
        answer = wait_in_the_feed(server, pool)
        began = time.monotonic()
        stopped = threading.Thread(target=server.stop)
        stopped.start()
        status, _, body = answer.result(30)
        stopped.join(60)
    assert (status, json.loads(body)["events"]) == (200, [])
    assert time.monotonic() - began < 5


def test_a_sighup_ends_the_waits_of_the_workers_it_replaces(tmp_path):
    server = GunicornServer(server_environ(PLANTSTORE_TOKENS=TOKEN))
    try:
        with ThreadPoolExecutor(1) as pool:
            answer = wait_in_the_feed(server, pool)
            (worker,) = server.worker_pids()
            began = time.monotonic()
            os.kill(server.pid, signal.SIGHUP)
            status, _, body = answer.result(30)
            assert (status, json.loads(body)["events"]) == (200, [])
            assert time.monotonic() - began < 5
            server.wait_for_stderr(rf"Worker exiting \(pid: {worker}\)")
    finally:
        server.stop()


def test_a_worker_lets_a_quarter_of_the_threads_it_is_given_wait():
    """`--threads 8`: two requests wait for the next event, and a third is answered at once,
    as if it had not asked to wait, leaving the worker's threads to serve."""
    environ = server_environ(PLANTSTORE_TOKENS=TOKEN, GUNICORN_CMD_ARGS="--threads 8")
    server = GunicornServer(environ)
    try:
        with ThreadPoolExecutor(2) as pool:
            waits = [wait_in_the_feed(server, pool)]
            waits.append(pool.submit(server.request, "GET", "/events?wait=30", None, AUTH))
            deadline = time.monotonic() + 30
            while waiting_requests(server) < 2:  # bounded poll of the worker's own gauge
                assert time.monotonic() < deadline, "the second request never waited"
                assert not waits[1].done(), waits[1].result()
            began = time.monotonic()
            status, _, body = server.request("GET", "/events?wait=30", headers=AUTH)
            assert (status, json.loads(body)["events"]) == (200, [])
            assert time.monotonic() - began < 5
            assert waiting_requests(server) == 2
    finally:
        server.stop()
