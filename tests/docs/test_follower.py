"""The follower docs/interface.md gives, run as written against the service under load: killed
and started again half-way, it resumes from its file, and ends with the plants the store holds."""

import json
import os
import random
import re
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from plantstore.testing.gunicorn_server import ROOT, GunicornServer, send, server_environ

pytestmark = pytest.mark.slow

TOKEN = "follower-token"
AUTH = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
LOAD_SECONDS = 10


def the_follower() -> str:
    """The Python block of docs/interface.md's "Following changes"."""
    section = (ROOT / "docs/interface.md").read_text().split("## Following changes", 1)[1]
    return re.search(r"```python\n(.*?)```", section, re.DOTALL)[1]


def change(server: GunicornServer, rng: random.Random, number: int) -> None:
    plant_id = rng.randrange(200)
    if rng.random() < 0.3:
        send(server.connect(), "DELETE", f"/plants/{plant_id}", None, AUTH)
    else:
        body = json.dumps({"name": f"plant {number}", "tag": rng.choice(["a", "b"])})
        send(server.connect(), "PUT", f"/plants/{plant_id}", body, AUTH)


def load(server: GunicornServer, seed: int, stop: threading.Event) -> int:
    rng = random.Random(seed)
    made = 0
    while not stop.is_set():
        made += 1
        change(server, rng, seed * 1_000_000 + made)
    return made


def listing(server: GunicornServer) -> tuple[dict, str]:
    plants, path, head = {}, "/plants?limit=1000", None
    while path:
        _, headers, body = send(server.connect(), "GET", path, None, AUTH)
        headers = {name.lower(): value for name, value in headers.items()}
        head = head or headers["events-after"]
        plants.update((str(plant.pop("id")), plant) for plant in json.loads(body))
        path = headers.get("link", "")[1:].split(">")[0]
    return plants, head


def test_the_documented_follower_keeps_a_copy_of_the_store_through_load_and_a_restart(
    tmp_path, note_figure
):
    script = tmp_path / "follower.py"
    script.write_text(the_follower())
    server = GunicornServer(
        server_environ(
            PLANTSTORE_TOKENS=TOKEN,
            PLANTSTORE_STORE=f"sqlite:///{tmp_path / 'plants.db'}",
            WEB_CONCURRENCY="2",
        ),
        log_dir=tmp_path,
    )
    follower_environ = {
        **os.environ,
        "PLANTSTORE_URL": f"http://{server.host}:{server.port}",
        "PLANTSTORE_TOKEN": TOKEN,
    }

    def start_follower() -> subprocess.Popen:
        return subprocess.Popen([sys.executable, str(script)], cwd=tmp_path, env=follower_environ)

    try:
        stop = threading.Event()
        with ThreadPoolExecutor(4) as pool:
            for number in range(300):  # plants for the follower to list before it follows
                change(server, random.Random(number), number)
            loads = [pool.submit(load, server, seed, stop) for seed in range(1, 4)]
            follower = start_follower()
            try:
                stop.wait(LOAD_SECONDS / 2)
                follower.send_signal(signal.SIGKILL)
                follower.wait(30)
                follower = start_follower()
                stop.wait(LOAD_SECONDS / 2)
            finally:
                stop.set()
                made = sum(changes.result(60) for changes in loads)
            plants, head = listing(server)
            state = tmp_path / "plants.json"
            deadline = time.monotonic() + 60
            while not (state.exists() and int(json.loads(state.read_text())[1]) >= int(head)):
                assert follower.poll() is None, "the follower stopped"
                assert time.monotonic() < deadline, "the follower never caught up"
                time.sleep(0.1)  # the follower writes its file as it reads each page
            copy, _ = json.loads(state.read_text())
            follower.terminate()
            follower.wait(30)
    finally:
        server.stop()
    note_figure(
        f"the documented follower: {made} changes under load, {len(plants)} plants at the end"
    )
    assert made > 300
    assert copy == plants
