"""Properties of `POST /plants` over every input hypothesis can think of, in process."""

import json

import falcon.testing
import hypothesis.strategies as st
import pytest
from hypothesis import given

from plantstore.api.schemas import INT64_MAX, INT64_MIN
from plantstore.app import create_app
from plantstore.config import Config
from plantstore.stores.memory import MemoryStore
from tests.conftest import TOKEN

#: Each property takes seconds for its examples: the slow set.
pytestmark = pytest.mark.slow

FIELDS = ("id", "name", "tag")
CONFIG = Config(tokens=frozenset({TOKEN}))

#: Integers reach past int64 on both sides, but not past a double's range: a number that
#: large is not parsed at all (a 400 of its own, tested in test_plants.py).
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(), children, max_size=3)
    ),
    max_leaves=6,
)
other_fields = st.dictionaries(
    st.text().filter(lambda key: key not in FIELDS), json_values, max_size=3
)
#: A float names one integer only below 2**53 in magnitude.
EXACT_FLOATS = 2**53
int64_ids = st.integers(INT64_MIN, INT64_MAX) | st.integers(
    -EXACT_FLOATS + 1, EXACT_FLOATS - 1
).map(float)


def fresh_client():
    """A client of a fresh service, so every example starts with an empty store."""
    return falcon.testing.TestClient(
        create_app(CONFIG, MemoryStore()), headers={"Authorization": f"Bearer {TOKEN}"}
    )


def post_body(body, client=None):
    """`POST /plants` of `body` (a JSON value, or bytes as sent), to `client` or a fresh service."""
    text = body if isinstance(body, bytes) else json.dumps(body)
    return (client or fresh_client()).simulate_post(
        "/plants", body=text, content_type="application/json"
    )


@given(
    plant_id=int64_ids,
    name=st.text(),
    tag=st.none() | st.text(),
    others=other_fields,
)
def test_every_valid_new_plant_answers_exactly_its_plant(plant_id, name, tag, others):
    plant = {"name": name} if tag is None else {"name": name, "tag": tag}
    result = post_body({**others, "id": plant_id, **plant})
    assert result.status_code == 200
    assert result.json == plant


def wrong_fields(body) -> set[str]:
    """The fields of `body` that break the contract, judged here independently of the schemas."""
    if not isinstance(body, dict):
        return {"body"}
    wrong = set()
    plant_id = body.get("id")
    if isinstance(plant_id, float) and plant_id.is_integer() and abs(plant_id) < EXACT_FLOATS:
        plant_id = int(plant_id)
    if type(plant_id) is not int or not INT64_MIN <= plant_id <= INT64_MAX:
        wrong.add("id")
    if not isinstance(body.get("name"), str):
        wrong.add("name")
    if "tag" in body and not isinstance(body["tag"], str):
        wrong.add("tag")
    return wrong


new_plant_like = st.builds(
    lambda fields, others: {**others, **fields},
    st.fixed_dictionaries(
        {}, optional={"id": int64_ids | json_values, "name": json_values, "tag": json_values}
    ),
    other_fields,
)


@given(body=(new_plant_like | json_values).filter(wrong_fields))
def test_every_invalid_body_is_400_naming_each_wrong_field(body):
    result = post_body(body)
    assert result.status_code == 400
    assert result.headers["content-type"] == "application/json"
    assert set(result.json) == {"error", "message"}
    assert result.json["error"] == 400
    named = {problem.split(": ", 1)[0] for problem in result.json["message"].split("; ")}
    assert named == wrong_fields(body)


around_the_bounds = st.sampled_from([EXACT_FLOATS, 2**63, 2**64]).flatmap(
    lambda bound: st.integers(bound - 3, bound + 3)
)
written_ids = st.tuples(
    st.integers(-(2**65), 2**65) | around_the_bounds | around_the_bounds.map(lambda n: -n),
    st.sampled_from(["{}", "{}.0", "{}.000", "{}e0", "{}E+0", "{}.00e0"]),
)


@given(written=written_ids)
def test_an_id_is_kept_as_exactly_the_integer_written_or_refused(written):
    """orjson's parse decides: a fraction part or an exponent makes a float, exact below 2**53."""
    plant_id, spelling = written
    client = fresh_client()
    result = post_body(b'{"id": %s, "name": "fern"}' % spelling.format(plant_id).encode(), client)
    as_float = spelling != "{}"
    if INT64_MIN <= plant_id <= INT64_MAX and not (as_float and abs(plant_id) >= EXACT_FLOATS):
        assert result.status_code == 200
        assert client.simulate_get("/plants").json == [{"id": plant_id, "name": "fern"}]
    else:
        assert result.status_code == 400
        assert result.json["message"].startswith("id: ")
        assert client.simulate_get("/plants").json == []
