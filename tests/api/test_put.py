"""`PUT /plants/{id}`, the `ETag` of every answer that carries a plant, and the conditions
`If-Match` and `If-None-Match` put on a change or a read, over Falcon's test client.

What a store does is checked on each kind of store, served as a worker serves it; what the API
alone decides (bad ids, bodies and types), on the memory store.
"""

import os
import re
import subprocess
import sys

import falcon
import falcon.testing
import pytest

from plantstore.api.media import ACCEPTED
from plantstore.app import create_app
from plantstore.testing.gunicorn_server import ROOT
from tests.api.test_plants import (
    MALFORMED,
    NOT_JSON_IN_UTF_8,
    NOT_PLANTS,
    assert_error,
    chunked,
    post,
)
from tests.api.test_read_list_delete import NOT_IDS, create, listed
from tests.conftest import TOKEN
from tests.support.clients import service

FERN = {"name": "fern", "tag": "green"}
ROSE = {"name": "rose", "tag": "red"}


@pytest.fixture
def served(store_url, worker_app):
    """A client of the service as a worker serves it, on each kind of store in turn (closed
    before its database is dropped)."""
    return service(worker_app, store_url, [])


def put(client, plant_id, body, headers=None):
    return client.simulate_put(f"/plants/{plant_id}", json=body, headers=headers)


def etag(result) -> str:
    """The answer's `ETag`: a strong one, quoted (RFC 9110 §8.8.3)."""
    tag = result.headers["etag"]
    assert re.fullmatch(r'"[\x21\x23-\x7e]+"', tag), tag
    return tag


def assert_plant(result, status, plant):
    """The answer is `plant`, as JSON, with its `ETag`."""
    assert result.status_code == status
    assert result.headers["content-type"] == "application/json"
    assert result.json == plant
    etag(result)


def assert_kept(client, plant_id, plant, tag):
    """The id holds `plant`, whose `ETag` is `tag`."""
    result = client.simulate_get(f"/plants/{plant_id}")
    assert_plant(result, 200, plant)
    assert etag(result) == tag


# Creating and replacing.


def test_a_put_to_a_free_id_creates_the_plant_201_with_where_it_is(served):
    result = put(served, 7, FERN)
    assert_plant(result, 201, FERN)
    assert result.headers["location"] == "/plants/7"
    assert_kept(served, 7, FERN, etag(result))
    assert listed(served).json == [{"id": 7, **FERN}]


@pytest.mark.parametrize("plant_id", [-(2**63), -1, 0, 2**63 - 1])
def test_a_put_takes_any_int64_id(client, plant_id):
    assert put(client, plant_id, FERN).headers["location"] == f"/plants/{plant_id}"
    assert client.simulate_get(f"/plants/{plant_id}").json == FERN


@pytest.mark.parametrize(
    ("mounted", "path", "location"),
    [
        ({"root_path": "/plantstore"}, "/plants/1", "/plantstore/plants/1"),
        ({"root_path": "/plant store"}, "/plants/1", "/plant%20store/plants/1"),
        ({"extras": {"SCRIPT_NAME": "/api"}}, "/plants/1", "/api/plants/1"),
        # `//plants/1` would be a URL of the host `plants`: a client would take its token there.
        ({}, "//plants/1", "/plants/1"),
        # The id as the service writes it, however the client wrote it.
        ({}, "/plants/01.0", "/plants/1"),
    ],
)
def test_the_location_is_where_the_service_is_mounted(client, mounted, path, location):
    result = client.simulate_put(path, json=FERN, **mounted)
    assert result.status_code == 201
    assert result.headers["location"] == location


def test_a_put_over_a_plant_replaces_it_200(served):
    created = post(served, {"id": 1, **FERN})
    result = put(served, 1, ROSE)
    assert_plant(result, 200, ROSE)
    assert "location" not in result.headers
    assert etag(result) != etag(created)
    assert_kept(served, 1, ROSE, etag(result))
    assert listed(served).json == [{"id": 1, **ROSE}]


def test_the_whole_plant_is_replaced_so_a_body_without_tag_leaves_none(served):
    create(served, 1, tag="green")
    create(served, 2, tag="green")
    result = put(served, 1, {"name": "ivy"})
    assert_plant(result, 200, {"name": "ivy"})
    assert_kept(served, 1, {"name": "ivy"}, etag(result))
    assert listed(served, "tag=green").json == [{"id": 2, "name": "fern", "tag": "green"}]
    assert listed(served).json == [
        {"id": 1, "name": "ivy"},
        {"id": 2, "name": "fern", "tag": "green"},
    ]


def test_a_new_tag_moves_the_plant_to_its_list(served):
    create(served, 1, tag="green")
    put(served, 1, {"name": "fern", "tag": "red"})
    assert listed(served, "tag=green").json == []
    assert listed(served, "tag=red").json == [{"id": 1, "name": "fern", "tag": "red"}]


@pytest.mark.parametrize("written", [3, 3.0])
def test_a_body_may_hold_the_paths_id(client, written):
    result = put(client, 3, {"id": written, **FERN})
    assert_plant(result, 201, FERN)
    assert listed(client).json == [{"id": 3, **FERN}]


def test_a_body_holding_another_id_is_400_naming_id_and_changes_nothing(client):
    create(client, 3)
    result = put(client, 3, {"id": 4, **ROSE})
    assert_error(result, 400, "id: ", "3")
    assert listed(client).json == [{"id": 3, "name": "fern"}]
    assert_error(put(client, 5, {"id": 4, **ROSE}), 400, "id: ", "5")
    assert listed(client).json == [{"id": 3, "name": "fern"}]


@pytest.mark.parametrize(("text", "why"), NOT_IDS)
def test_an_id_that_is_not_a_decimal_int64_is_400_naming_id(client, text, why):
    assert_error(client.simulate_put(f"/plants/{text}", json=FERN), 400, f"id: {why}")
    assert listed(client).json == []


@pytest.mark.parametrize(("body", "field", "why"), NOT_PLANTS)
def test_a_body_that_is_not_a_plant_is_400_as_post_words_it(client, body, field, why):
    assert_error(put(client, 1, body), 400, f"{field}: {why}")
    assert post(client, body).json == put(client, 1, body).json
    assert listed(client).json == []


@pytest.mark.parametrize(("body", "why"), MALFORMED)
def test_malformed_json_is_400_as_post_words_it(client, body, why):
    result = client.simulate_put("/plants/1", body=body, content_type="application/json")
    assert_error(result, 400, why)
    posted = client.simulate_post("/plants", body=body, content_type="application/json")
    assert posted.json == result.json
    assert listed(client).json == []


@pytest.mark.parametrize("content_type", NOT_JSON_IN_UTF_8)
def test_a_body_that_is_not_json_in_utf_8_is_415_as_for_post(client, content_type):
    result = client.simulate_put("/plants/1", body=b'{"name": "fern"}', content_type=content_type)
    assert_error(result, 415)
    assert result.json["message"] == ACCEPTED
    assert listed(client).json == []


def test_a_body_over_the_limit_is_413_as_for_post(client, config):
    body = b'{"name": "' + b"x" * config.max_body_bytes + b'"}'
    result = client.simulate_put("/plants/1", body=body, content_type="application/json")
    assert_error(result, 413, str(config.max_body_bytes))
    posted = client.simulate_post("/plants", body=body, content_type="application/json")
    assert posted.json == result.json
    assert listed(client).json == []


@pytest.mark.parametrize(("beyond", "status"), [(0, 201), (1, 413)])
def test_a_chunked_body_is_bounded_as_for_post(app, config, beyond, status):
    head, tail = b'{"name": "', b'"}'
    body = head + b"x" * (config.max_body_bytes + beyond - len(head) - len(tail)) + tail
    environ = falcon.testing.create_environ(
        method="PUT",
        path="/plants/1",
        headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"},
    )
    environ.pop("CONTENT_LENGTH", None)
    environ.update(chunked(body))
    result = falcon.testing.StartResponseMock()
    b"".join(app(environ, result))
    assert result.status.startswith(str(status))


def test_a_put_needs_the_token(anonymous, client):
    result = anonymous.simulate_put("/plants/1", json=FERN)
    assert_error(result, 401)
    assert result.headers["www-authenticate"] == 'Bearer realm="plantstore"'
    assert listed(client).json == []


# The validator.


def test_every_answer_carrying_the_plant_has_its_one_etag(served):
    tag = etag(post(served, {"id": 1, **FERN}))
    assert etag(post(served, {"id": 1, **FERN})) == tag
    assert etag(served.simulate_get("/plants/1")) == tag
    assert etag(served.simulate_head("/plants/1")) == tag
    assert etag(put(served, 1, FERN)) == tag
    assert etag(put(served, 2, FERN)) == tag, "the same plant under another id"


def test_the_etag_changes_whenever_the_plant_does_and_only_then(served):
    first = etag(put(served, 1, FERN))
    # The same plant, written otherwise: nothing changes.
    again = put(served, 1, {"tag": "green", "id": 1.0, "name": "fern", "colour": "blue"})
    assert (again.status_code, etag(again)) == (200, first)
    assert post(served, {"id": 1, **ROSE}).status_code == 409
    assert put(served, 1, ROSE, {"If-Match": '"other"'}).status_code == 412
    assert_kept(served, 1, FERN, first)
    renamed = etag(put(served, 1, {**FERN, "name": "Fern"}))
    untagged = etag(put(served, 1, {"name": "Fern"}))
    assert len({first, renamed, untagged}) == 3
    assert_kept(served, 1, {"name": "Fern"}, untagged)


PLANTS = [FERN, {"name": "Fußnote 🌿 \u0000 \u2028", "tag": "日本"}, {"name": ""}]


def test_the_etag_of_a_plant_is_the_same_on_every_store(sqlite_url, postgres_url, worker_app):
    clients = [service(worker_app, url, []) for url in ("memory://", sqlite_url, postgres_url)]
    for plant_id, plant in enumerate(PLANTS):
        tags = {
            (etag(post(client, {"id": plant_id, **plant})), etag(put(client, -plant_id - 1, plant)))
            for client in clients
        }
        assert len(tags) == 1
        ((posted, put_tag),) = tags
        assert posted == put_tag
        for client in clients:
            assert etag(client.simulate_get(f"/plants/{plant_id}")) == posted


# Answers the ETags of PLANTS, from an app of its own, in a process of its own.
_ANOTHER_WORKER = """
import falcon.testing
from plantstore.app import create_app
from plantstore.config import Config
from plantstore.stores.memory import MemoryStore
from tests.api.test_put import PLANTS

client = falcon.testing.TestClient(
    create_app(Config(tokens=frozenset({"t"})), MemoryStore()),
    headers={"Authorization": "Bearer t"},
)
for plant_id, plant in enumerate(PLANTS):
    print(client.simulate_put(f"/plants/{plant_id}", json=plant).headers["etag"])
"""


@pytest.mark.slow
def test_the_etag_of_a_plant_is_the_same_in_every_process(client):
    """As on every worker and host: nothing of the process (its hash seed) goes into it."""
    here = [etag(put(client, plant_id, plant)) for plant_id, plant in enumerate(PLANTS)]
    there = subprocess.run(
        [sys.executable, "-c", _ANOTHER_WORKER],
        env={**os.environ, "PYTHONHASHSEED": "12345"},
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert there == here


@pytest.mark.parametrize(
    "kept",
    [
        b'{"tag":"gr\\u00fcn","name":"fern"}',
        b'{ "name" : "f\\u0065rn", "tag" : "gr\xc3\xbcn" }',
    ],
)
def test_a_put_of_the_plant_kept_in_another_spelling_changes_nothing(any_store, config, kept):
    """A database written by an earlier version, or another JSON writer, keeps its plants, and
    its `ETag`s: the plant answered is the kept one, byte for byte."""
    any_store.add(1, kept)
    client = falcon.testing.TestClient(
        create_app(config, any_store), headers={"Authorization": f"Bearer {TOKEN}"}
    )
    tag = etag(client.simulate_get("/plants/1"))
    result = put(client, 1, {"name": "fern", "tag": "grün"}, {"If-Match": tag})
    assert (result.status_code, result.content, etag(result)) == (200, kept, tag)
    assert any_store.get(1) == kept


# Conditional changes.


def test_if_match_with_the_current_etag_replaces_and_deletes(served):
    read = etag(post(served, {"id": 1, **FERN}))
    replaced = put(served, 1, ROSE, {"If-Match": read})
    assert_plant(replaced, 200, ROSE)
    assert (
        served.simulate_delete("/plants/1", headers={"If-Match": etag(replaced)}).status_code == 204
    )
    assert_error(served.simulate_get("/plants/1"), 404)


def test_if_match_with_an_etag_read_before_a_change_is_412_and_changes_nothing(served):
    """Two clients read the plant; one changes it; the other's change, made on what it read,
    is refused, and so is its delete."""
    read = etag(post(served, {"id": 1, **FERN}))
    changed = etag(put(served, 1, ROSE, {"If-Match": read}))
    refused = put(served, 1, {"name": "ivy"}, {"If-Match": read})
    assert_error(refused, 412, "1", "If-Match")
    assert "etag" not in refused.headers
    assert_error(served.simulate_delete("/plants/1", headers={"If-Match": read}), 412, "1")
    assert_kept(served, 1, ROSE, changed)


@pytest.mark.parametrize(
    "if_match",
    [
        '"0123456789abcdef"',
        '""',
        "W/{current}",  # a weak tag never matches, not even the current one
        '"x", W/{current}',
    ],
)
@pytest.mark.parametrize("method", ["PUT", "DELETE"])
def test_if_match_with_no_current_etag_is_412_and_changes_nothing(client, method, if_match):
    current = etag(post(client, {"id": 1, **FERN}))
    result = client.simulate_request(
        method, "/plants/1", json=ROSE, headers={"If-Match": if_match.format(current=current)}
    )
    assert_error(result, 412, "1")
    assert_kept(client, 1, FERN, current)


def test_if_match_with_a_list_holding_the_current_etag_goes_ahead(client):
    current = etag(post(client, {"id": 1, **FERN}))
    assert_plant(put(client, 1, ROSE, {"If-Match": f'"x", W/{current}, {current}'}), 200, ROSE)
    current = etag(client.simulate_get("/plants/1"))
    headers = {"If-Match": f'{current}, "y"'}
    assert client.simulate_delete("/plants/1", headers=headers).status_code == 204


def test_if_match_star_changes_a_plant_that_exists_and_nothing_else(served):
    star = {"If-Match": "*"}
    assert_error(put(served, 1, FERN, star), 412, "1")
    assert_error(served.simulate_delete("/plants/1", headers=star), 412, "1")
    assert_error(served.simulate_get("/plants/1"), 404)
    create(served, 1)
    assert_plant(put(served, 1, ROSE, star), 200, ROSE)
    assert served.simulate_delete("/plants/1", headers=star).status_code == 204
    assert_error(served.simulate_get("/plants/1"), 404)


def test_if_none_match_star_makes_a_put_create_only(served):
    create_only = {"If-None-Match": "*"}
    created = put(served, 1, FERN, create_only)
    assert_plant(created, 201, FERN)
    assert_error(put(served, 1, ROSE, create_only), 412, "1")
    assert_error(put(served, 1, FERN, create_only), 412, "1")
    assert_kept(served, 1, FERN, etag(created))


def test_if_none_match_with_the_current_etag_refuses_a_change(client):
    current = etag(post(client, {"id": 1, **FERN}))
    assert_error(put(client, 1, ROSE, {"If-None-Match": current}), 412, "1")
    assert_error(client.simulate_delete("/plants/1", headers={"If-None-Match": current}), 412)
    assert_plant(put(client, 1, ROSE, {"If-None-Match": '"other"'}), 200, ROSE)


# Conditional reads.


@pytest.mark.parametrize("method", ["GET", "HEAD"])
def test_if_none_match_naming_the_plant_is_304_with_its_etag_and_no_body(served, method):
    current = etag(post(served, {"id": 1, **FERN}))
    for if_none_match in (current, f"W/{current}", f'"x", {current}', "*"):
        result = served.simulate_request(
            method, "/plants/1", headers={"If-None-Match": if_none_match}
        )
        assert result.status_code == 304, if_none_match
        assert etag(result) == current
        assert result.content == b""


@pytest.mark.parametrize("method", ["GET", "HEAD"])
def test_if_none_match_naming_another_plant_answers_this_one(served, method):
    old = etag(post(served, {"id": 1, **FERN}))
    current = etag(put(served, 1, ROSE))
    result = served.simulate_request(method, "/plants/1", headers={"If-None-Match": old})
    assert result.status_code == 200
    assert etag(result) == current
    if method == "GET":
        assert result.json == ROSE


@pytest.mark.parametrize("if_none_match", ["*", '"0123456789abcdef"'])
def test_a_conditional_get_of_no_plant_is_404(client, if_none_match):
    result = client.simulate_get("/plants/1", headers={"If-None-Match": if_none_match})
    assert_error(result, 404, "1")


def test_a_get_whose_if_match_fails_is_412(client):
    current = etag(post(client, {"id": 1, **FERN}))
    assert_error(client.simulate_get("/plants/1", headers={"If-Match": '"other"'}), 412, "1")
    assert etag(client.simulate_get("/plants/1", headers={"If-Match": current})) == current


# POST, beside PUT.


def test_post_repeats_the_plant_as_it_is_now_and_conflicts_with_what_it_was(served):
    post(served, {"id": 1, **FERN})
    replaced = put(served, 1, ROSE)
    again = post(served, {"id": 1, **ROSE})
    assert (again.status_code, again.content, etag(again)) == (
        200,
        replaced.content,
        etag(replaced),
    )
    assert_error(post(served, {"id": 1, **FERN}), 409, "1")
    assert_kept(served, 1, ROSE, etag(replaced))


def test_post_repeats_a_plant_a_put_created(served):
    created = put(served, 1, FERN)
    again = post(served, {"id": 1, **FERN})
    assert (again.status_code, again.content, etag(again)) == (200, created.content, etag(created))
    assert_error(post(served, {"id": 1, **ROSE}), 409, "1")
