"""`GET /plants/{id}`, `DELETE /plants/{id}` and `GET /plants`, over Falcon's test client."""

import re

import falcon.testing
import orjson
import pytest

from plantstore.api.schemas import MAX_PAGE_BYTES
from plantstore.app import create_app
from plantstore.config import Config
from plantstore.core.plants import ID_BYTES
from tests.api.test_plants import assert_error, post
from tests.conftest import TOKEN


def create(client, plant_id, name="fern", tag=None):
    plant = {"id": plant_id, "name": name, **({} if tag is None else {"tag": tag})}
    result = post(client, plant)
    assert result.status_code == 200
    return result


def listed(client, query=""):
    result = client.simulate_get("/plants", query_string=query)
    assert result.status_code == 200
    assert result.headers["content-type"] == "application/json"
    return result


def next_page(result) -> str | None:
    """The path and query of the `next` link, or None."""
    link = result.headers.get("link")
    if link is None:
        return None
    match = re.fullmatch(r'<([^>]*)>; rel="next"', link)
    assert match, link
    return match[1]


def walk(client, query="") -> list[dict]:
    """Every plant the list gives, following `next` to the end."""
    items, target = [], f"/plants?{query}"
    while target:
        path, _, query_string = target.partition("?")
        result = listed(client, query_string)
        assert path == "/plants"
        items += result.json
        target = next_page(result)
    return items


@pytest.mark.parametrize("plant_id", [0, -1, -(2**63), 2**63 - 1, 42])
def test_get_answers_the_plant_byte_for_byte_as_its_create_did(client, plant_id):
    created = create(client, plant_id, "Fußnote 🌿 \u0000", tag="日本")
    result = client.simulate_get(f"/plants/{plant_id}")
    assert result.status_code == 200
    assert result.headers["content-type"] == "application/json"
    assert result.content == created.content


def test_an_id_may_be_written_with_a_zero_fraction_as_json_schema_counts_integers(client):
    """A client that got the id as a JSON number such as `5.0` may write it back so."""
    created = create(client, 2**53 + 1)
    assert client.simulate_get(f"/plants/{2**53 + 1}.0").content == created.content
    assert client.simulate_delete(f"/plants/{2**53 + 1}.00").status_code == 204


def test_get_of_an_id_with_no_plant_is_404(client):
    create(client, 1)
    assert_error(client.simulate_get("/plants/2"), 404, "2")


#: A path's `{id}`s that are not a decimal int64, each with why.
NOT_IDS = [
    ("abc", "Not a decimal integer."),
    ("1.5", "Not a decimal integer."),
    ("1e3", "Not a decimal integer."),
    ("%201", "Not a decimal integer."),
    ("9223372036854775808", "Must be an int64"),
    ("-9223372036854775809", "Must be an int64"),
]


@pytest.mark.parametrize("method", ["GET", "DELETE"])
@pytest.mark.parametrize(("text", "why"), NOT_IDS)
def test_an_id_that_is_not_a_decimal_int64_is_400_naming_id(client, method, text, why):
    assert_error(client.simulate_request(method, f"/plants/{text}"), 400, f"id: {why}")


def test_delete_answers_204_without_a_body_then_404(client):
    create(client, 7)
    result = client.simulate_delete("/plants/7")
    assert result.status_code == 204
    assert result.content == b""
    assert_error(client.simulate_delete("/plants/7"), 404, "7")


def test_a_deleted_id_is_free(client):
    create(client, 1, "fern")
    create(client, 2, "ivy")
    assert client.simulate_delete("/plants/1").status_code == 204
    assert_error(client.simulate_get("/plants/1"), 404)
    assert listed(client).json == [{"id": 2, "name": "ivy"}]
    assert post(client, {"id": 1, "name": "rose", "tag": "red"}).json == {
        "name": "rose",
        "tag": "red",
    }
    assert client.simulate_get("/plants/1").json == {"name": "rose", "tag": "red"}


def test_delete_leaves_other_plants_alone(client):
    for plant_id in range(5):
        create(client, plant_id, tag="t")
    client.simulate_delete("/plants/2")
    assert [item["id"] for item in listed(client, "tag=t").json] == [0, 1, 3, 4]


def test_the_list_holds_every_plant_with_its_id_in_ascending_order(client):
    for plant_id in [5, -3, 2**63 - 1, 0, -(2**63)]:
        create(client, plant_id, f"p{plant_id}", tag="even" if plant_id % 2 == 0 else None)
    result = listed(client)
    assert result.json == [
        {"id": -(2**63), "name": f"p{-(2**63)}", "tag": "even"},
        {"id": -3, "name": "p-3"},
        {"id": 0, "name": "p0", "tag": "even"},
        {"id": 5, "name": "p5"},
        {"id": 2**63 - 1, "name": f"p{2**63 - 1}"},
    ]
    assert "link" not in result.headers


def test_an_empty_store_lists_an_empty_array(client):
    assert listed(client).content == b"[]"


def test_a_page_holds_100_plants_unless_told_and_a_full_one_links_the_next(client):
    for plant_id in range(101):
        create(client, plant_id)
    first = listed(client)
    assert [item["id"] for item in first.json] == list(range(100))
    assert next_page(first) == "/plants?after=99"
    last = listed(client, "after=99")
    assert last.json == [{"id": 100, "name": "fern"}]
    assert next_page(last) is None


def test_the_next_link_keeps_limit_and_tag_and_drops_other_parameters(client):
    for plant_id in range(4):
        create(client, plant_id, tag="a b&c=d")
    result = listed(client, "limit=2&tag=a%20b%26c%3Dd&colour=red")
    assert [item["id"] for item in result.json] == [0, 1]
    assert next_page(result) == "/plants?limit=2&tag=a%20b%26c%3Dd&after=1"


@pytest.mark.parametrize(
    ("prefix", "written"), [("/plantstore", "/plantstore"), ("/plant store", "/plant%20store")]
)
def test_the_next_link_honours_a_proxys_prefix_written_as_a_uri(client, prefix, written):
    for plant_id in range(3):
        create(client, plant_id)
    result = client.simulate_get("/plants", query_string="limit=2", root_path=prefix)
    assert next_page(result) == f"{written}/plants?limit=2&after=1"


@pytest.mark.parametrize(
    ("prefix", "path", "link"),
    [
        ("", "//plants", "/plants"),
        ("", "///plants", "/plants"),
        # A server decodes `%2F` into the path it hands over, as the test client does.
        ("", "/%2Fplants", "/plants"),
        ("/plantstore", "//plants", "/plantstore//plants"),
        ("//plantstore", "/plants", "/plantstore/plants"),
    ],
)
def test_the_next_link_is_a_path_even_when_the_request_doubled_its_slash(
    client, prefix, path, link
):
    """`//plants` would be a URL of the host `plants`: a client would take its token there."""
    for plant_id in range(3):
        create(client, plant_id)
    result = client.simulate_get(path, query_string="limit=2", root_path=prefix)
    assert [item["id"] for item in result.json] == [0, 1]
    assert next_page(result) == f"{link}?limit=2&after=1"


@pytest.fixture
def roomy_client(store):
    """A client of a service that takes plants of up to twice a page's bytes."""
    config = Config(tokens=frozenset({TOKEN}), max_body_bytes=2 * MAX_PAGE_BYTES)
    return falcon.testing.TestClient(
        create_app(config, store), headers={"Authorization": f"Bearer {TOKEN}"}
    )


def test_a_page_of_large_plants_holds_a_mebibyte_of_them_and_links_the_next(roomy_client):
    """1,000 plants of 60 KB would be a page of 60 MB: it holds as many as fit in 1 MiB."""
    name = "x" * 60_000
    for plant_id in range(40):
        create(roomy_client, plant_id, name)
    first = listed(roomy_client, "limit=1000")
    # Each plant counts as its document and the most an id adds to it.
    fitting = MAX_PAGE_BYTES // (len(orjson.dumps({"name": name})) + ID_BYTES)
    assert [item["id"] for item in first.json] == list(range(fitting))
    assert sum(len(orjson.dumps(item)) for item in first.json) <= MAX_PAGE_BYTES
    assert next_page(first) == f"/plants?limit=1000&after={fitting - 1}"
    assert [item["id"] for item in walk(roomy_client, "limit=1000")] == list(range(40))


def test_a_plant_larger_than_a_page_is_listed_on_a_page_of_its_own(roomy_client):
    sizes = {1: 10, 2: MAX_PAGE_BYTES + 1, 3: 10, 4: MAX_PAGE_BYTES // 2, 5: MAX_PAGE_BYTES // 2}
    for plant_id, size in sizes.items():
        create(roomy_client, plant_id, "x" * size)
    pages, target = [], "/plants?limit=10"
    while target:
        result = listed(roomy_client, target.partition("?")[2])
        pages.append([item["id"] for item in result.json])
        target = next_page(result)
    assert pages == [[1], [2], [3, 4], [5]]


def test_a_page_that_ends_exactly_at_the_last_plant_links_to_an_empty_one(client):
    for plant_id in range(2):
        create(client, plant_id)
    result = listed(client, "limit=2")
    assert next_page(result) == "/plants?limit=2&after=1"
    empty = listed(client, "limit=2&after=1")
    assert empty.json == []
    assert next_page(empty) is None


def test_after_and_tag_choose_the_plants(client):
    for plant_id in range(-5, 5):
        create(client, plant_id, tag=["x", "y", ""][plant_id % 3])
    assert [item["id"] for item in listed(client, "after=2").json] == [3, 4]
    assert [item["id"] for item in listed(client, "tag=x").json] == [-3, 0, 3]
    assert [item["id"] for item in listed(client, "tag=").json] == [-4, -1, 2]
    assert [item["id"] for item in listed(client, "tag=y&after=-2").json] == [1, 4]
    assert listed(client, "tag=z").json == []
    assert listed(client, f"after={2**63 - 1}").json == []


@pytest.mark.parametrize(
    ("query", "parameter"),
    [
        ("limit=0", "limit"),
        ("limit=1001", "limit"),
        ("limit=ten", "limit"),
        ("limit=", "limit"),
        ("limit=1&limit=2", "limit"),
        ("after=1.5", "after"),
        ("after=9223372036854775808", "after"),
        ("tag=a&tag=b", "tag"),
    ],
)
def test_a_bad_query_parameter_is_400_naming_it(client, query, parameter):
    assert_error(client.simulate_get("/plants", query_string=query), 400, f"{parameter}: ")


def test_following_next_yields_every_plant_once_while_others_come_and_go(client):
    for plant_id in range(0, 300, 3):
        create(client, plant_id, tag="kept")
    seen, target, step = [], "/plants?limit=7&tag=kept", 0
    while target:
        result = listed(client, target.partition("?")[2])
        seen += [item["id"] for item in result.json]
        # Between pages, plants come and go before and after the cursor.
        create(client, 1000 + step, tag="kept")
        create(client, -1000 - step, tag="kept")
        create(client, step * 3 + 1, tag="kept")
        client.simulate_delete(f"/plants/{step * 3 + 1}")
        step += 1
        target = next_page(result)
    assert len(seen) == len(set(seen))
    assert seen == sorted(seen)
    assert set(range(0, 300, 3)) <= set(seen)
    assert not {plant_id for plant_id in seen if plant_id < 0}


@pytest.mark.parametrize(
    "path", ["/plants?limit=1", "/plants/1", "/plants/2", "/plants/x", "/healthz", "/readyz"]
)
def test_head_answers_what_get_would_without_the_body(client, path):
    create(client, 1)
    create(client, 3)
    assert_head_answers_as_get(client, path)


def assert_head_answers_as_get(client, path):
    """HEAD `path` (and its query) answers GET's status and headers, but no body."""
    target, _, query = path.partition("?")
    got = client.simulate_get(target, query_string=query)
    head = client.simulate_head(target, query_string=query)
    assert head.status_code == got.status_code
    assert head.content == b""
    ignored = {"x-request-id"}
    assert {k: v for k, v in head.headers.items() if k not in ignored} == {
        k: v for k, v in got.headers.items() if k not in ignored
    }


def test_head_of_the_document_needs_no_token(anonymous):
    assert anonymous.simulate_head("/openapi.json").status_code == 200


@pytest.mark.parametrize(
    ("method", "path"),
    [("GET", "/plants"), ("HEAD", "/plants"), ("GET", "/plants/1"), ("DELETE", "/plants/1")],
)
def test_every_new_operation_needs_the_token(anonymous, client, method, path):
    create(client, 1)
    result = anonymous.simulate_request(method, path)
    assert result.status_code == 401
    assert result.headers["www-authenticate"] == 'Bearer realm="plantstore"'
    if method != "HEAD":
        assert_error(result, 401)
    assert client.simulate_get("/plants/1").status_code == 200


def test_a_plant_path_does_not_take_post(client):
    result = client.simulate_post("/plants/1", json={"id": 1, "name": "fern"})
    assert_error(result, 405)
    assert set(result.headers["allow"].split(", ")) == {"GET", "HEAD", "DELETE", "OPTIONS", "PUT"}
