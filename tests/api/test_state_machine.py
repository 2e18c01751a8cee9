"""Random sequences of every plant operation, through the app, against a plain dict as the model.

Each example starts on an empty store, of each kind in turn, and runs creates, repeats,
conflicts, gets, puts, deletes and paged listings in any order over a few ids, so that an id is
taken, changed, freed and taken again, and pages start and end anywhere; gets, puts and deletes
at times on conditions (`If-Match`, `If-None-Match`), which hold or not. Every answer is checked
in full, and every `ETag` against those answered before.
"""

import itertools
import re
from urllib.parse import parse_qsl, quote, urlencode

import falcon.testing
import psycopg
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, precondition, rule, run_state_machine_as_test

from plantstore.api import plants as plants_resource
from plantstore.api.schemas import INT64_MAX, INT64_MIN
from plantstore.app import create_app
from plantstore.config import Config, store_kind
from plantstore.core.plants import stored_plant
from plantstore.core.stores import PlantStore
from plantstore.stores import open_store
from plantstore.stores.memory import MemoryStore
from tests.api.test_plants import assert_error
from tests.conftest import TOKEN
from tests.support.pages import expected_page
from tests.support.settled import settled

CONFIG = Config(tokens=frozenset({TOKEN}))
#: Few ids, so that steps meet the same ones; the int64 extremes among them.
IDS = (INT64_MIN, INT64_MIN + 1, -1, 0, 1, 2, INT64_MAX - 1, INT64_MAX)
#: Tags that are awkward in a query string or to a database, and a few others.
tags = st.sampled_from(["", "\u0000", "a b&c=d+%", "日本 🌿"]) | st.text(max_size=4)
names = st.sampled_from(["", "\u0000", "fern", "'); DROP TABLE plants; --"]) | st.text(max_size=8)


def plant(name: str, tag: str | None) -> dict:
    return {"name": name} if tag is None else {"name": name, "tag": tag}


plants = st.builds(plant, names, st.none() | tags)


pages = st.integers(1, 3)
#: The bytes of a page in these tests: of its few small plants, some pages hold as many as asked,
#: and others fewer, cut short where the next would not fit.
PAGE_BYTES = 100
afters = st.none() | st.sampled_from(IDS)
taken_ids = precondition(lambda machine: machine.model)
free_ids = precondition(lambda machine: len(machine.model) < len(IDS))
#: An `ETag` the service never answers: not a digest.
NEVER_ANSWERED = '"never-answered"'


class PlantStoreMachine(RuleBasedStateMachine):
    """The service on an empty store, and `model`: each id's plant and the body answered for it
    when it was stored."""

    #: Gives an empty store for each example; set by the test.
    empty_store: staticmethod
    #: The bytes of a page, as the test sets them for the app.
    max_page_bytes: int

    def __init__(self) -> None:
        super().__init__()
        self.client = falcon.testing.TestClient(
            create_app(CONFIG, self.empty_store()), headers={"Authorization": f"Bearer {TOKEN}"}
        )
        self.model: dict[int, tuple[dict, bytes]] = {}
        #: The `ETag` first answered for each plant body: the same bytes must get the same one
        #: again, and other bytes another.
        self.etags: dict[bytes, str] = {}
        #: Every tag a create kept, so that listings also ask for tags whose plants are gone.
        self.tags_kept: set[str] = set()

    def post(self, plant_id: int, content: dict):
        return self.client.simulate_post("/plants", json={"id": plant_id, **content})

    def taken_id(self, data) -> int:
        return data.draw(st.sampled_from(sorted(self.model)), "taken id")

    def free_id(self, data) -> int:
        return data.draw(st.sampled_from([i for i in IDS if i not in self.model]), "free id")

    def any_id(self, data) -> int:
        """A taken id as often as a free one, while there are both."""
        taken = sorted(self.model)
        free = [i for i in IDS if i not in self.model]
        return data.draw(st.one_of([st.sampled_from(ids) for ids in (taken, free) if ids]), "id")

    def check_plant(self, result, status: int, content: dict) -> bytes:
        """Check an answer that carries a plant, and its `ETag`; give its body."""
        assert result.status_code == status
        assert result.headers["content-type"] == "application/json"
        assert result.json == content
        self.check_etag(result.headers["etag"], result.content)
        return result.content

    def check_etag(self, etag: str, body: bytes) -> None:
        """`etag` is strong, and the one answered for `body` before, and for no other body."""
        assert re.fullmatch(r'"[^"\s]+"', etag), etag
        answered = self.etags.setdefault(body, etag)
        assert answered == etag, f"{body!r} was answered {answered}, now {etag}"
        assert [other for other in self.etags if self.etags[other] == etag] == [body]

    def etag(self, plant_id: int) -> str:
        """The `ETag` of the plant under `plant_id` in the model."""
        return self.etags[self.model[plant_id][1]]

    def names_of(self, plant_id: int) -> st.SearchStrategy[str]:
        """Lists of `ETag`s that name the plant under `plant_id`: `*`, its own, or its own
        among others."""
        etag = self.etag(plant_id)
        return st.sampled_from(["*", etag, f"{NEVER_ANSWERED}, {etag}"])

    def other_etags(self, plant_id: int, weak_own: bool) -> st.SearchStrategy[str]:
        """`ETag`s that name no plant under `plant_id`: one never answered, or another plant's;
        with `weak_own`, also the plant's own as a weak tag, which an `If-Match` never matches
        (strong comparison) though an `If-None-Match` does (weak comparison)."""
        own = self.etag(plant_id) if plant_id in self.model else None
        made_up = st.sampled_from(
            [NEVER_ANSWERED, f"W/{own}"] if weak_own and own is not None else [NEVER_ANSWERED]
        )
        others = sorted(set(self.etags.values()) - {own})
        return made_up | st.sampled_from(others) if others else made_up

    def refusals(self, plant_id: int) -> st.SearchStrategy[dict]:
        """Conditions that do not hold for what `plant_id` holds, so that a change of it is
        refused: an `If-Match` that does not name its plant, or any `If-Match` when there is
        none; `If-None-Match: *` when there is one."""
        if plant_id not in self.model:
            return (st.just("*") | self.other_etags(plant_id, weak_own=False)).map(if_match)
        return self.other_etags(plant_id, weak_own=True).map(if_match) | st.just(
            {"If-None-Match": "*"}
        )

    def check_held(self, plant_id: int) -> None:
        """A read of `plant_id` answers what the model holds."""
        result = self.client.simulate_get(f"/plants/{plant_id}")
        if plant_id in self.model:
            content, body = self.model[plant_id]
            assert self.check_plant(result, 200, content) == body
        else:
            assert_error(result, 404, str(plant_id))

    def put(self, plant_id: int, content: dict, with_id: bool, headers: dict):
        body = {"id": plant_id, **content} if with_id else content
        return self.client.simulate_put(f"/plants/{plant_id}", json=body, headers=headers)

    def stored(self, plant_id: int, content: dict, body: bytes) -> None:
        self.model[plant_id] = (content, body)
        if "tag" in content:
            self.tags_kept.add(content["tag"])

    @free_ids
    @rule(data=st.data(), content=plants)
    def create(self, data, content):
        plant_id = self.free_id(data)
        self.stored(plant_id, content, self.check_plant(self.post(plant_id, content), 200, content))

    @taken_ids
    @rule(data=st.data())
    def repeat(self, data):
        plant_id = self.taken_id(data)
        content, body = self.model[plant_id]
        assert self.check_plant(self.post(plant_id, content), 200, content) == body

    @taken_ids
    @rule(data=st.data())
    def conflict(self, data):
        plant_id = self.taken_id(data)
        content = data.draw(plants.filter(lambda other: other != self.model[plant_id][0]))
        assert_error(self.post(plant_id, content), 409, str(plant_id))

    @taken_ids
    @rule(data=st.data())
    def get(self, data):
        plant_id = self.taken_id(data)
        content, body = self.model[plant_id]
        assert (
            self.check_plant(self.client.simulate_get(f"/plants/{plant_id}"), 200, content) == body
        )

    @taken_ids
    @rule(data=st.data(), method=st.sampled_from(["GET", "HEAD"]), matches=st.booleans())
    def get_if_none_match(self, data, method, matches):
        """304 with the `ETag` and no body when `If-None-Match` names the plant (a weak tag of
        it too: the comparison is weak), else the plant."""
        plant_id = self.taken_id(data)
        content, body = self.model[plant_id]
        etag = self.etag(plant_id)
        names = data.draw(
            self.names_of(plant_id) | st.just(f"W/{etag}")
            if matches
            else self.other_etags(plant_id, weak_own=False),
            "If-None-Match",
        )
        result = self.client.simulate_request(
            method, f"/plants/{plant_id}", headers={"If-None-Match": names}
        )
        if matches:
            assert result.status_code == 304
            assert result.headers["etag"] == etag
            assert "content-type" not in result.headers
            assert result.content == b""
        elif method == "HEAD":
            assert result.status_code == 200
            assert result.headers["etag"] == etag
            assert result.content == b""
        else:
            assert self.check_plant(result, 200, content) == body

    @free_ids
    @rule(data=st.data(), names=st.sampled_from(["*", NEVER_ANSWERED]))
    def get_absent_if_none_match(self, data, names):
        plant_id = self.free_id(data)
        result = self.client.simulate_get(f"/plants/{plant_id}", headers={"If-None-Match": names})
        assert_error(result, 404, str(plant_id))

    @free_ids
    @rule(
        data=st.data(),
        content=plants,
        with_id=st.booleans(),
        headers=st.sampled_from([{}, {"If-None-Match": "*"}]),
    )
    def put_new(self, data, content, with_id, headers):
        """201 with the plant and where it is, plainly or with `If-None-Match: *`."""
        plant_id = self.free_id(data)
        result = self.put(plant_id, content, with_id, headers)
        body = self.check_plant(result, 201, content)
        assert result.headers["location"] == f"/plants/{plant_id}"
        self.stored(plant_id, content, body)

    @taken_ids
    @rule(data=st.data(), with_id=st.booleans())
    def put_over(self, data, with_id):
        """200 with the new plant, plainly or with an `If-Match` that names the plant; the same
        plant again is answered as it was stored, with the same `ETag`."""
        plant_id = self.taken_id(data)
        kept, body = self.model[plant_id]
        content = data.draw(st.just(kept) | plants, "content")
        headers = data.draw(st.just({}) | self.names_of(plant_id).map(if_match), "headers")
        result = self.put(plant_id, content, with_id, headers)
        assert "location" not in result.headers
        if content == kept:
            assert self.check_plant(result, 200, content) == body
        else:
            self.stored(plant_id, content, self.check_plant(result, 200, content))

    @rule(data=st.data(), content=plants, with_id=st.booleans())
    def put_refused(self, data, content, with_id):
        """412 on a condition that does not hold, and the plant (or none) as it was."""
        plant_id = self.any_id(data)
        headers = data.draw(self.refusals(plant_id), "headers")
        assert_error(self.put(plant_id, content, with_id, headers), 412, str(plant_id))
        self.check_held(plant_id)

    @free_ids
    @rule(data=st.data())
    def get_absent(self, data):
        plant_id = self.free_id(data)
        assert_error(self.client.simulate_get(f"/plants/{plant_id}"), 404, str(plant_id))

    @taken_ids
    @rule(data=st.data())
    def delete(self, data):
        """204, plainly or with an `If-Match` that names the plant."""
        plant_id = self.taken_id(data)
        headers = data.draw(st.just({}) | self.names_of(plant_id).map(if_match), "headers")
        result = self.client.simulate_delete(f"/plants/{plant_id}", headers=headers)
        assert result.status_code == 204
        assert result.content == b""
        del self.model[plant_id]

    @rule(data=st.data())
    def delete_refused(self, data):
        """412 on a condition that does not hold, and the plant (or none) as it was."""
        plant_id = self.any_id(data)
        headers = data.draw(self.refusals(plant_id), "headers")
        result = self.client.simulate_delete(f"/plants/{plant_id}", headers=headers)
        assert_error(result, 412, str(plant_id))
        self.check_held(plant_id)

    @free_ids
    @rule(data=st.data())
    def delete_absent(self, data):
        plant_id = self.free_id(data)
        assert_error(self.client.simulate_delete(f"/plants/{plant_id}"), 404, str(plant_id))

    @rule(limit=pages, after=afters, tag=st.none() | tags)
    def list_every_page(self, limit, after, tag):
        self.walk(limit, after, tag)

    @precondition(lambda self: self.tags_kept)
    @rule(data=st.data(), limit=pages, after=afters)
    def list_every_page_of_a_kept_tag(self, data, limit, after):
        """The same, for a tag some plant has or had: the plants a tag index must keep right."""
        self.walk(limit, after, data.draw(st.sampled_from(sorted(self.tags_kept)), "tag"))

    def walk(self, limit: int, after: int | None, tag: str | None) -> None:
        """Follow `next` from a first page to the end: every plant chosen, once, in id order,
        on pages cut short where the next plant would not fit in `max_page_bytes`."""
        remaining = [
            (plant_id, body)
            for plant_id, (content, body) in sorted(self.model.items())
            if (after is None or plant_id > after) and (tag is None or content.get("tag") == tag)
        ]
        query = {"limit": limit, **({} if tag is None else {"tag": tag})}
        target = urlencode(query if after is None else {**query, "after": after}, quote_via=quote)
        # Every page but an empty last one holds a plant at least; the bound keeps a link that
        # never ends from running forever.
        most = len(remaining) + 1
        for _ in range(most):
            result = self.client.simulate_get("/plants", query_string=target)
            assert result.status_code == 200
            assert result.headers["content-type"] == "application/json"
            plants, full = expected_page(remaining, limit, self.max_page_bytes)
            assert result.json == [{"id": n, **self.model[n][0]} for n, _ in plants]
            assert result.content == b"[%b]" % b",".join(stored_plant(*pair) for pair in plants)
            if not full:
                assert "link" not in result.headers
                break
            target = next_query(result.headers["link"])
            assert parsed(target) == {**query, "after": plants[-1][0]}
            remaining = remaining[len(plants) :]
        else:
            raise AssertionError(f"more than {most} pages")


def if_match(names: str) -> dict:
    return {"If-Match": names}


def next_query(link: str) -> str:
    """The query string of a `Link: </plants?...>; rel="next"`."""
    match = re.fullmatch(r'</plants\?([^>]*)>; rel="next"', link)
    assert match, link
    return match[1]


def parsed(query_string: str) -> dict:
    """A query string's parameters, with `limit` and `after` as ints."""
    query = dict(parse_qsl(query_string, keep_blank_values=True, strict_parsing=True))
    return {
        name: int(value) if name in ("limit", "after") else value for name, value in query.items()
    }


@pytest.fixture
def empty_store(store_url, tmp_path):
    """A function that gives an empty store of `store_url`'s kind, called for each example.

    SQLite gets a new file, so each example also makes the tables as on a first start.
    PostgreSQL keeps one store, settled before any example starts, and empties its table: a new
    store would start its pool's threads while hypothesis draws, and their use of `random`
    (psycopg_pool's jitter) upsets it (`settled`).
    """
    kind = store_kind(store_url)
    opened: list[PlantStore] = []
    if kind == "postgresql":
        shared = settled(open_store(store_url))
        opened.append(shared)

        def empty() -> PlantStore:
            with psycopg.connect(store_url, autocommit=True) as connection:
                connection.execute("TRUNCATE plants")
            return shared

    elif kind == "sqlite":
        files = (tmp_path / f"plants-{n}.db" for n in itertools.count())

        def empty() -> PlantStore:
            while opened:
                opened.pop().close()
            opened.append(open_store(f"sqlite:///{next(files)}"))
            return opened[-1]

    else:
        empty = MemoryStore
    yield empty
    for store in opened:
        store.close()


# Thousands of operations on each store take seconds, more on a durable one: the slow set.
@pytest.mark.slow
def test_every_sequence_of_operations_answers_as_the_model_does(empty_store, monkeypatch):
    monkeypatch.setattr(plants_resource, "MAX_PAGE_BYTES", PAGE_BYTES)
    machine = type(
        "Machine",
        (PlantStoreMachine,),
        {"empty_store": staticmethod(empty_store), "max_page_bytes": PAGE_BYTES},
    )
    run_state_machine_as_test(
        machine,
        settings=settings(
            max_examples=80,
            stateful_step_count=40,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
        ),
    )
