"""Creates, deletes, reads and conditional changes of a few ids, racing over three gunicorn
workers on one database."""

import collections
import contextlib
import json
import random
from collections.abc import Iterator
from pathlib import Path

import pytest

from plantstore.testing.gunicorn_server import GunicornServer, server_environ
from tests.support.concurrency import at_once

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


@contextlib.contextmanager
def three_workers(store_url: str, log_dir: Path) -> Iterator[GunicornServer]:
    """gunicorn with three workers on the store, stopped when the block ends; once stopped, it
    must have booted three workers and logged no traceback."""
    # gunicorn's access log goes to a file: thousands of lines would fill a pipe and stall it.
    server = GunicornServer(
        server_environ(PLANTSTORE_TOKENS=TOKEN, PLANTSTORE_STORE=store_url, WEB_CONCURRENCY="3"),
        log_dir=log_dir,
    )
    try:
        yield server
    finally:
        _, stderr = server.stop()
    assert "Traceback" not in stderr
    assert stderr.count("Booting worker") == 3


def left(server: GunicornServer, ids) -> tuple[dict, list[dict], dict[str, list[dict]]]:
    """What the race left: each id's `GET` answer, the list of every plant, and each tag's."""
    final = {plant_id: server.request("GET", f"/plants/{plant_id}", None, AUTH) for plant_id in ids}
    return final, listed(server), {tag: listed(server, f"tag={tag}") for tag in TAGS}


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
    with three_workers(store_url, tmp_path) as server:
        runs = at_once(THREADS, lambda thread: race(server, thread))
        final, every_plant, by_tag = left(server, IDS)
    answers = [answer for run in runs for answer in run]

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


#: The ids whose plants the writers change, each created as `FIRST` before they start.
CHANGED_IDS = (-(2**63), 1, 2**63 - 1)
FIRST = "planted"
WRITERS, ROUNDS, ATTEMPTS = 16, 40, 5

#: One `PUT` as a writer saw it: the id, the plant it sent, and the answer.
Change = collections.namedtuple("Change", "plant_id plant status body etag")


def rename(server: GunicornServer, writer: int) -> tuple[list[Change], list[tuple[str, str]]]:
    """Change plants of `CHANGED_IDS` at random, each as read: `GET` it, then `PUT` it with
    `If-Match` of the `ETag` read and a name that is the name read, `>`, and a token of this
    attempt's own. On 412 read it again and try again, a few times.

    Gives the writer's changes, and the (name, `ETag`) of every plant it read.
    """
    rng = random.Random(writer)
    changes, reads = [], []
    for n in range(ROUNDS):
        plant_id = rng.choice(CHANGED_IDS)
        for attempt in range(ATTEMPTS):
            status, headers, body = server.request("GET", f"/plants/{plant_id}", None, AUTH)
            assert status == 200, body
            etag = headers["etag"]
            read = json.loads(body)
            reads.append((read["name"], etag))
            plant = {"name": f"{read['name']}>{writer}.{n}.{attempt}", "tag": rng.choice(TAGS)}
            status, headers, body = server.request(
                "PUT", f"/plants/{plant_id}", json.dumps(plant), {**AUTH, "If-Match": etag}
            )
            changes.append(Change(plant_id, plant, status, body, headers.get("etag")))
            if status != 412:
                break
    return changes, reads


@pytest.mark.slow
@pytest.mark.parametrize("store_url", ["sqlite", "postgres"], indirect=True)
def test_changes_as_read_form_one_history_with_nothing_lost(store_url, tmp_path, note_figure):
    """Writers race `PUT`s with `If-Match` on a few plants over three workers. Each new name
    is the name it replaced, `>`, and a token: the name a plant ends with spells its whole
    history, and every 200 must be a step of it, one step each.

    So the names the 200s sent, shortest first, are exactly the prefixes of the final name:
    as many as the changes it shows, none lost (a name no later plant starts with was
    overwritten by a writer that never read it) and none forked (two 200s that replaced the
    same plant, so the same `ETag`, make two names of one length, and only one of them can be
    a prefix). A store whose check of the `ETag` and write of the plant are not one atomic
    step breaks this. And every read and every 200 of one plant give one `ETag`, another
    plant's another.
    """
    with three_workers(store_url, tmp_path) as server:
        for plant_id in CHANGED_IDS:
            body = json.dumps({"id": plant_id, "name": FIRST, "tag": TAGS[0]})
            assert server.request("POST", "/plants", body, AUTH)[0] == 200
        runs = at_once(WRITERS, lambda writer: rename(server, writer))
        final, every_plant, by_tag = left(server, CHANGED_IDS)

    changes = [change for run_changes, _ in runs for change in run_changes]
    statuses = collections.Counter(change.status for change in changes)
    note_figure(f"PUT races ({store_url.split(':')[0]}): {dict(statuses)}")
    assert set(statuses) == {200, 412}, statuses
    etags = {}
    for change in changes:
        if change.status == 200:
            assert json.loads(change.body) == change.plant
            etags.setdefault(change.plant["name"], set()).add(change.etag)
        else:
            assert json.loads(change.body)["error"] == 412
            assert change.etag is None
    for _, reads in runs:
        for name, etag in reads:
            etags.setdefault(name, set()).add(etag)
    assert all(len(tags) == 1 for tags in etags.values())
    assert len(set().union(*etags.values())) == len(etags)

    stored = {}
    for plant_id in CHANGED_IDS:
        status, headers, body = final[plant_id]
        assert status == 200
        stored[plant_id] = json.loads(body)
        assert {headers["etag"]} == etags[stored[plant_id]["name"]]
        history = stored[plant_id]["name"].split(">")
        assert history[0] == FIRST
        steps = {">".join(history[:n]) for n in range(2, len(history) + 1)}
        made = [c.plant for c in changes if c.plant_id == plant_id and c.status == 200]
        assert len(made) > 1, "a plant was hardly changed: the race tested too little"
        assert [plant["name"] for plant in made if plant["name"] not in steps] == []
        assert len(made) == len(steps)
        assert stored[plant_id] in made
    assert every_plant == [{"id": plant_id, **stored[plant_id]} for plant_id in CHANGED_IDS]
    for tag, plants in by_tag.items():
        assert plants == [plant for plant in every_plant if plant["tag"] == tag]
