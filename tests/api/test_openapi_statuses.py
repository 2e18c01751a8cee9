"""Each operation of the document answers every failing status it lists, and no other.

The document derives most of an operation's statuses from what its responder takes (a body,
conditions, a token, the store: plantstore/api/openapi/paths.py). Here the same requests, each
a way to fail, go to every operation the document lists, and what the app answers is held to
what the document says, both ways. The examples' session (tests/api/test_openapi.py) shows a few
of these answers in full; this finds every status, of every operation.
"""

import dataclasses
from collections import defaultdict

import falcon.testing
import orjson
import pytest

from plantstore.app import create_app
from plantstore.core.stores import StoreUnavailable
from tests.conftest import TOKEN

#: What nginx or gunicorn answers before the app sees a request, and a bug: nothing the app
#: is sent here can give them.
BEFORE_THE_APP = {414, 431, 500}

FERN = {"name": "fern", "tag": "green"}
AUTH = {"Authorization": f"Bearer {TOKEN}"}

#: Each way to fail, as the request it sends to an operation: the plant its path names (1 is
#: fern, 3 is free), the query, the headers, and the body for an operation that takes one; or a
#: body in another charset than JSON's, sent to every operation.
PROBES = {
    "valid": {},
    "another plant": {"body": {"id": 1, "name": "ivy"}},
    "a free id": {"plant": "3", "body": {"id": 3, **FERN}},
    "invalid": {"plant": "one", "params": {"limit": "0"}, "body": {"id": "one"}},
    "a cursor older than the feed": {"params": {"after": "0"}},
    "too large": {"body": {"id": 1, **FERN, "tag": "x" * 4096}},
    "not UTF-8": {"latin_1": {"id": 1, **FERN}},
    "no token": {"headers": {}},
    "a token that may only read": {"headers": {"Authorization": "Bearer reader"}},
    "a token that may only scrape": {"headers": {"Authorization": "Bearer scraper"}},
    "not as read": {"headers": {**AUTH, "If-Match": '"another"'}},
    "only if none": {"headers": {**AUTH, "If-None-Match": "*"}},
}


class DownStore:
    """A store that cannot serve, whatever it is asked."""

    def __getattr__(self, name):
        def unavailable(*args, **kwargs):
            raise StoreUnavailable("the store is down")

        return unavailable


def operations(document):
    """Each operation: its id, method, path, itself, and the statuses it lists."""
    for template, methods in document["paths"].items():
        for method, operation in methods.items():
            listed = {int(status) for status in operation["responses"]} - BEFORE_THE_APP
            yield operation["operationId"], method.upper(), template, operation, listed


def send(client, method, template, operation, plant="1", headers=AUTH, body=None, **sent):
    """Send a probe: `body` as JSON where the operation takes one, `latin_1` to any."""
    path = template.replace("{id}", plant)
    if "latin_1" in sent:
        headers = {**headers, "Content-Type": f"{falcon.MEDIA_JSON}; charset=latin-1"}
        return client.simulate_request(
            method, path, headers=headers, body=orjson.dumps(sent["latin_1"])
        )
    if "requestBody" not in operation:
        body = None
    elif body is None:
        body = {"id": 1, **FERN}
    return client.simulate_request(
        method, path, params=sent.get("params"), headers=headers, json=body
    )


def probe(config, store):
    """Send every probe to every operation of the document that the app serves.

    Returns:
        The document, and each answer: the operation's id, the plant its path named, the
        result. Each probe finds fern alone in the store.
    """
    client = falcon.testing.TestClient(create_app(config, store))
    down = falcon.testing.TestClient(create_app(config, DownStore()))
    document = client.simulate_get("/openapi.json").json
    answers = []
    for operation_id, *request, _ in operations(document):
        for probe in PROBES.values():
            store.delete(1)
            store.delete(3)
            store.add(1, orjson.dumps(FERN))
            plant = probe.get("plant", "1")
            answers.append((operation_id, plant, send(client, *request, **probe)))
        answers.append((operation_id, "1", send(down, *request)))
    return document, answers


@pytest.fixture
def config(config, tmp_path):
    """The tests' config, and a tokens file of two tokens of one scope each."""
    tokens_file = tmp_path / "tokens"
    tokens_file.write_text("reader scopes=read\nscraper scopes=metrics\n")
    return dataclasses.replace(config, tokens_file=str(tokens_file))


@pytest.mark.parametrize("metrics_public", [False, True])
def test_each_operation_answers_exactly_the_statuses_it_lists(config, store, metrics_public):
    """Public metrics, too, are described as the app serves them: with no 401 or 403."""
    config = dataclasses.replace(config, metrics_public=metrics_public)
    document, answers = probe(config, store)
    answered = defaultdict(set)
    for operation_id, _, result in answers:
        answered[operation_id].add(result.status_code)
    listed = {operation_id: statuses for operation_id, *_, statuses in operations(document)}
    assert answered == listed


#: The failures the app words one way, whichever request gets them, but for the plant's id.
WORDED_ONCE = {404, 409, 412, 415, 503}


def test_a_failure_worded_once_is_described_in_the_words_a_client_reads(config, store):
    """Its description begins with the message a client reads, `{id}` standing for the
    plant's id; the words are the app's, taken from where it answers them."""
    document, answers = probe(config, store)
    described = {
        operation["operationId"]: operation["responses"]
        for methods in document["paths"].values()
        for operation in methods.values()
    }
    components = document["components"]["responses"]
    seen, misdescribed = set(), []
    for operation_id, plant, result in answers:
        if result.status_code not in WORDED_ONCE or not result.content:  # a HEAD's has none
            continue
        answer = described[operation_id][str(result.status_code)]
        if "$ref" in answer:
            answer = components[answer["$ref"].rsplit("/", 1)[1]]
        seen.add(result.status_code)
        if not answer["description"].replace("{id}", plant).startswith(result.json["message"]):
            misdescribed.append((operation_id, result.json, answer["description"]))
    assert seen == WORDED_ONCE
    assert misdescribed == []
