"""Properties of `POST /plants` over every input hypothesis can think of, in process."""

import json

import falcon.testing
import hypothesis.strategies as st
from hypothesis import given

from plantstore.app import create_app
from plantstore.config import Config
from plantstore.schemas import INT64_MAX, INT64_MIN
from plantstore.stores.memory import MemoryStore
from tests.conftest import TOKEN

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
int64_ids = st.integers(INT64_MIN, INT64_MAX) | st.integers(-(2**53), 2**53).map(float)


def post(body):
    """Post to a fresh service, so every example starts with an empty store."""
    client = falcon.testing.TestClient(create_app(CONFIG, MemoryStore()))
    return client.simulate_post(
        "/plants",
        body=json.dumps(body),
        headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"},
    )


@given(
    plant_id=int64_ids,
    name=st.text(),
    tag=st.none() | st.text(),
    others=other_fields,
)
def test_every_valid_new_plant_answers_exactly_its_plant(plant_id, name, tag, others):
    plant = {"name": name} if tag is None else {"name": name, "tag": tag}
    result = post({**others, "id": plant_id, **plant})
    assert result.status_code == 200
    assert result.json == plant


def wrong_fields(body) -> set[str]:
    """The fields of `body` that break the contract, judged here independently of the schemas."""
    if not isinstance(body, dict):
        return {"body"}
    wrong = set()
    plant_id = body.get("id")
    if isinstance(plant_id, float) and plant_id.is_integer() and abs(plant_id) <= 2**53:
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
    result = post(body)
    assert result.status_code == 400
    assert result.headers["content-type"] == "application/json"
    assert set(result.json) == {"error", "message"}
    assert result.json["error"] == 400
    named = {problem.split(": ", 1)[0] for problem in result.json["message"].split("; ")}
    assert named == wrong_fields(body)
