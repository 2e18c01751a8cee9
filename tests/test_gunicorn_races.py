"""Creates, deletes and reads of a few ids, racing over three gunicorn workers on one database."""

import collections
import json
import random

import pytest

from tests.concurrency import at_once
from tests.gunicorn_server import GunicornServer, server_environ

TOKEN = "race-token"
AUTH = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
IDS = (-(2**63), 0, 7, 2**63 - 1)
TAGS = ("a", "b", "c")
THREADS, REQUESTS = 16, 300

#: One request as the test saw it: the id, the method, the plant a create sent, and the answer.
Answer = collections.namedtuple("Answer", "plant_id method plant status body")


def race(server: GunicornServer, thread: int) -> list[Answer]:
    """Create, delete and get plants of `IDS` at random; every create sends a plant of its own.

    Each request comes on a connection of its own, so that it may reach any of the workers.
    """
    rng = random.Random(thread)
    answers = []
    for n in range(REQUESTS):
        plant_id, dice = rng.choice(IDS), rng.random()
        if dice < 0.5:
            plant = {"name": f"thread {thread} request {n}", "tag": rng.choice(TAGS)}
            body = json.dumps({"id": plant_id, **plant})
            status, _, answer = server.request("POST", "/plants", body, AUTH)
            answers.append(Answer(plant_id, "POST", plant, status, answer))
        else:
            method = "DELETE" if dice < 0.85 else "GET"
            status, _, answer = server.request(method, f"/plants/{plant_id}", None, AUTH)
            answers.append(Answer(plant_id, method, None, status, answer))
    return answers


def listed(server: GunicornServer, query: str = "") -> list[dict]:
    status, _, body = server.request("GET", f"/plants?{query}", None, AUTH)
    assert status == 200
    return json.loads(body)


@pytest.mark.slow
@pytest.mark.parametrize("store_url", ["sqlite", "postgres"], indirect=True)
def test_every_answer_is_explained_by_some_order_of_the_requests(store_url, tmp_path):
    """Every create sends a plant of its own, so its 200 means it inserted, and a 204 deleted.

    In any serial order of the requests, an id's inserts and deletes alternate: inserted,
    deleted, inserted... So each id has as many 204s as 200s, or one fewer, and one fewer
    exactly when it ends holding a plant: one whose create answered 200, as is every plant a
    get answers. A store whose add, delete or tag index mistakes a row another worker changed
    meanwhile breaks one of these, or answers 500.
    """
    # gunicorn's access log goes to a file: thousands of lines would fill a pipe and stall it.
    server = GunicornServer(
        server_environ(PLANTSTORE_TOKENS=TOKEN, PLANTSTORE_STORE=store_url, WEB_CONCURRENCY="3"),
        log_dir=tmp_path,
    )
    try:
        runs = at_once(THREADS, lambda thread: race(server, thread))
        answers = [answer for run in runs for answer in run]
        final = {
            plant_id: server.request("GET", f"/plants/{plant_id}", None, AUTH) for plant_id in IDS
        }
        every_plant = listed(server)
        by_tag = {tag: listed(server, f"tag={tag}") for tag in TAGS}
    finally:
        _, stderr = server.stop()
    assert "Traceback" not in stderr
    assert stderr.count("Booting worker") == 3

    statuses = collections.Counter((answer.method, answer.status) for answer in answers)
    assert set(statuses) <= {
        ("POST", 200),
        ("POST", 409),
        ("DELETE", 204),
        ("DELETE", 404),
        ("GET", 200),
        ("GET", 404),
    }, statuses
    inserted = collections.defaultdict(list)
    deleted = collections.Counter()
    for answer in answers:
        if answer.method == "POST" and answer.status == 200:
            assert json.loads(answer.body) == answer.plant
            inserted[answer.plant_id].append(answer.plant)
        elif answer.status == 204:
            assert answer.body == b""
            deleted[answer.plant_id] += 1
        elif answer.status in (404, 409):
            error = json.loads(answer.body)
            assert error["error"] == answer.status
            assert str(answer.plant_id) in error["message"]
    for answer in answers:
        if (answer.method, answer.status) == ("GET", 200):
            assert json.loads(answer.body) in inserted[answer.plant_id]
    assert all(len(inserted[plant_id]) > 1 and deleted[plant_id] for plant_id in IDS), (
        "an id was not taken, freed and taken again: the race tested too little"
    )

    holding = {}
    for plant_id in IDS:
        status, _, body = final[plant_id]
        assert len(inserted[plant_id]) - deleted[plant_id] == (1 if status == 200 else 0)
        if status == 200:
            holding[plant_id] = json.loads(body)
            assert holding[plant_id] in inserted[plant_id]
        else:
            assert status == 404
    assert every_plant == [{"id": plant_id, **holding[plant_id]} for plant_id in sorted(holding)]
    for tag, plants in by_tag.items():
        assert plants == [plant for plant in every_plant if plant["tag"] == tag]
