"""`If-Match` and `If-None-Match` are read by RFC 9110's grammar, and a field that does not
parse is a 400 naming it: never a change made as though the client had set no condition.

The grammar (§8.8.3, §5.6.1.2, §13.1.1, §13.1.2):

    If-Match = "*" / #entity-tag            entity-tag = [ "W/" ] DQUOTE *etagc DQUOTE
    etagc    = %x21 / %x23-7E / obs-text    #element   = [ element ] *( OWS "," OWS [ element ] )
"""

import re

import falcon
import falcon.testing
import pytest
from hypothesis import given
from hypothesis import strategies as st

from plantstore.api.conditions import ENTITY_TAGS_PATTERN, entity_tags
from plantstore.app import create_app
from plantstore.config import Config
from plantstore.stores.memory import MemoryStore
from tests.api.test_plants import assert_error, post
from tests.api.test_put import FERN, ROSE, assert_kept, etag, put
from tests.conftest import TOKEN
from tests.support.linear_time import BOUND, LONGEST, assert_linear, at_most

#: The characters of an opaque tag, and those that are none: a header's bytes, as Latin-1.
ETAGC = st.characters(codec="latin-1", min_codepoint=0x21, exclude_characters='"\x7f')
NOT_ETAGC = st.sampled_from([chr(code) for code in (*range(0x21), 0x7F)])
OWS = st.text(alphabet=" \t", max_size=2)

#: An element of a list: a tag (opaque, weak), or None for an empty element.
TAGS = st.tuples(st.text(alphabet=ETAGC, max_size=8), st.booleans())
ELEMENTS = st.one_of(st.none(), TAGS)


def written(element) -> str:
    if element is None:
        return ""
    opaque, weak = element
    return f'{"W/" if weak else ""}"{opaque}"'


@st.composite
def lists(draw, with_a_tag=False):
    """A field value by the grammar, and the tags it lists, in order; `with_a_tag`, at least
    one."""
    drawn = draw(st.lists(ELEMENTS, max_size=5))
    if with_a_tag:
        drawn.insert(draw(st.integers(0, len(drawn))), draw(TAGS))
    value = written(drawn[0]) if drawn else ""
    for element in drawn[1:]:
        value += draw(OWS) + "," + draw(OWS) + written(element)
    tags = [element for element in drawn if element is not None]
    return draw(OWS) + value + draw(OWS), tags


def read(value: str):
    parsed = entity_tags("If-Match", value)
    return parsed if parsed == "*" else [(str(tag), tag.is_weak) for tag in parsed]


def refused(value: str) -> bool:
    try:
        entity_tags("If-Match", value)
    except falcon.HTTPBadRequest as ex:
        assert ex.description.startswith("If-Match must be * or a list of entity-tags")
        return True
    return False


@given(lists())
def test_a_list_by_the_grammar_names_its_tags_in_order(field):
    value, tags = field
    assert read(value) == tags


def test_commas_and_stars_inside_quotes_belong_to_the_tag():
    assert read('"a,b", W/"*" ,,"*"') == [("a,b", False), ("*", True), ("*", False)]


@pytest.mark.parametrize("value", ["*", " *", "*\t"])
def test_the_wildcard_is_the_whole_value_alone(value):
    assert read(value) == "*"


@pytest.mark.slow
@given(lists(with_a_tag=True), st.data())
def test_a_character_outside_etagc_inside_a_tag_is_refused(field, data):
    value, _ = field
    quotes = [found.start() for found in re.finditer('"', value)]
    after = data.draw(st.sampled_from(quotes[::2])) + 1
    assert refused(value[:after] + data.draw(NOT_ETAGC) + value[after:])


@given(lists(), st.sampled_from(["*", "abc", "W/abc", 'W"a"', '"a', 'a"', '"a" "b"', '"a"b']))
def test_a_list_holding_anything_but_entity_tags_is_refused(field, stray):
    value, _ = field
    assert refused(f"{value}, {stray}")
    assert refused(f"{stray},{value}")


@given(st.text(st.characters(codec="latin-1"), max_size=30))
def test_any_value_is_read_or_refused_as_the_documents_pattern_says(value):
    """The document's pattern is the grammar too: a client generated from it sends only what
    the service reads."""
    assert refused(value) == (re.fullmatch(ENTITY_TAGS_PATTERN, value) is None)


def test_the_document_gives_the_grammar_as_both_fields_pattern(anonymous):
    parameters = anonymous.simulate_get("/openapi.json").json["components"]["parameters"]
    for name in ("If-Match", "If-None-Match"):
        assert parameters[name]["schema"]["pattern"] == ENTITY_TAGS_PATTERN


# As an attacker reads them: values built to make a parser backtrack, and time bounds on them.

#: The grammar as RFC 9110 writes it, which lets whitespace between two commas match two ways:
#: what the service's reading must agree with, tried only on values short enough that the
#: exponential time it takes on one that almost matches is still short.
AS_THE_RFC_WRITES_IT = (
    r'[ \t]*(?:\*|(?:(W/)?"[\x21\x23-\x7e\x80-\xff]*")?'
    r'(?:[ \t]*,[ \t]*(?:(W/)?"[\x21\x23-\x7e\x80-\xff]*")?)*)[ \t]*'
)
#: Pieces of a value, most of them the grammar's, so that the values made of them nearly read.
PIECES = st.sampled_from([" ", "\t", ",", '"', "W/", "*", "a", "!", "\x7f", "\xff", '"a"', 'W/"'])


@given(st.lists(PIECES, max_size=10).map("".join))
def test_the_service_reads_the_grammar_as_the_rfc_writes_it(value):
    assert refused(value) == (re.fullmatch(AS_THE_RFC_WRITES_IT, value) is None)


#: Values that almost read, as long as `n` makes them. A pattern that lets a character match two
#: ways tries both at each, on the first (the issue's) for 78 s at n = 14, holding the GIL.
ALMOST = {
    "whitespace and commas": lambda n: " \t ," * n + "!",
    "spaces": lambda n: " " * n + "!",
    "commas": lambda n: "," * n + "!",
    "commas and spaces": lambda n: ", " * n + "!",
    "tags": lambda n: '"a",' * n + "!",
    "weak tags and whitespace": lambda n: 'W/"a" ,\t' * n + "!",
    "an unterminated tag": lambda n: '"' + "a" * n,
    "weak marks": lambda n: "W/" * n,
    "quotes after commas": lambda n: ', "' * n + "!",
    "whitespace after a tag": lambda n: '"a"' + " \t" * n + "!",
    "whitespace around the wildcard": lambda n: " \t" * n + "*" + " \t" * n + "!",
}
#: Values that read, as long as `n` makes them, and what each names.
LONG = {
    "weak tags and whitespace": (lambda n: 'W/"a" ,\t' * n, lambda n: [("a", True)] * n),
    "whitespace and commas": (lambda n: " \t ," * n, lambda n: []),
    "a long tag": (lambda n: '"' + "a" * n + '"', lambda n: [("a" * n, False)]),
    "whitespace around the wildcard": (lambda n: " \t" * n + "*" + " \t" * n, lambda n: "*"),
}


def documented(value: str) -> bool:
    return re.fullmatch(ENTITY_TAGS_PATTERN, value) is not None


@pytest.mark.parametrize("family", ALMOST.values(), ids=list(ALMOST))
def test_a_value_that_almost_reads_is_refused_in_linear_time(family):
    """By the service, and by the document's pattern in a backtracking engine, as a client's."""
    assert_linear(refused, family)
    assert_linear(documented, family)
    assert refused(family(LONGEST))
    assert not documented(family(LONGEST))


@pytest.mark.parametrize(("family", "reading"), LONG.values(), ids=list(LONG))
def test_a_long_value_is_read_in_linear_time(family, reading):
    assert_linear(read, family)
    assert_linear(documented, family)
    assert read(family(LONGEST)) == reading(LONGEST)
    assert documented(family(LONGEST))


@pytest.mark.parametrize("family", ALMOST.values(), ids=list(ALMOST))
@pytest.mark.parametrize("header", ["If-Match", "If-None-Match"])
@pytest.mark.parametrize("method", ["GET", "PUT", "DELETE"])
def test_a_request_whose_field_almost_reads_is_400_at_once(client, method, header, family):
    """The worker's thread is free again within `BOUND`, and the other threads with it."""
    current = etag(post(client, {"id": 1, **FERN}))
    with at_most(BOUND):
        result = client.simulate_request(
            method, "/plants/1", json=ROSE, headers={header: family(LONGEST)}
        )
    assert_error(result, 400, f"{header} must be * or a list of entity-tags")
    assert_kept(client, 1, FERN, current)


# Over the API: what the fields do to changes and reads.

#: The issue's, each of which once changed a plant as though no condition had been sent.
UNREADABLE = [
    "abc, def",
    "stale-tag, other-tag",
    ', "unterminated',
    "stale-tag",
    "*,",
    "*, *",
    ", *",
]


@pytest.mark.parametrize("value", UNREADABLE)
@pytest.mark.parametrize("method", ["PUT", "DELETE"])
def test_a_change_whose_if_match_does_not_parse_is_400_and_changes_nothing(client, method, value):
    current = etag(post(client, {"id": 1, **FERN}))
    result = client.simulate_request(method, "/plants/1", json=ROSE, headers={"If-Match": value})
    assert_error(result, 400, "If-Match must be * or a list of entity-tags")
    assert_kept(client, 1, FERN, current)


@pytest.mark.parametrize("value", UNREADABLE)
def test_a_put_to_a_free_id_whose_if_match_does_not_parse_is_400_and_makes_nothing(client, value):
    assert_error(put(client, 2, FERN, {"If-Match": value}), 400, "If-Match")
    assert_error(client.simulate_get("/plants/2"), 404)


@pytest.mark.parametrize("value", UNREADABLE)
@pytest.mark.parametrize("method", ["GET", "PUT", "DELETE"])
def test_an_if_none_match_that_does_not_parse_is_400_naming_it(client, method, value):
    current = etag(post(client, {"id": 1, **FERN}))
    result = client.simulate_request(
        method, "/plants/1", json=ROSE, headers={"If-None-Match": value}
    )
    assert_error(result, 400, "If-None-Match must be * or a list of entity-tags")
    assert_kept(client, 1, FERN, current)


@pytest.mark.parametrize("value", ['"*"', 'W/"*"'])
def test_a_quoted_star_is_a_tag_not_the_wildcard(client, value):
    current = etag(post(client, {"id": 1, **FERN}))
    assert_error(put(client, 1, ROSE, {"If-Match": value}), 412, "1")
    assert_error(client.simulate_delete("/plants/1", headers={"If-Match": value}), 412, "1")
    assert_error(put(client, 2, FERN, {"If-Match": value}), 412, "2")
    read = client.simulate_get("/plants/1", headers={"If-None-Match": value})
    assert (read.status_code, read.json) == (200, FERN)
    assert_kept(client, 1, FERN, current)


@pytest.mark.parametrize("value", ["", " ", ",", " , ,"])
def test_an_empty_list_names_no_tag(client, value):
    """`If-Match` then holds for no plant, and `If-None-Match` for every one."""
    current = etag(post(client, {"id": 1, **FERN}))
    assert_error(put(client, 1, ROSE, {"If-Match": value}), 412, "1")
    assert_kept(client, 1, FERN, current)
    assert client.simulate_get("/plants/1", headers={"If-None-Match": value}).status_code == 200
    assert put(client, 1, ROSE, {"If-None-Match": value}).status_code == 200


@pytest.mark.slow
@given(lists(), st.booleans())
def test_a_put_with_a_readable_if_match_goes_ahead_exactly_when_it_names_the_plant(field, naming):
    """Whatever the list: a strong tag naming the plant lets the change through; anything
    else (weak tags, other tags, none) is 412 and changes nothing."""
    client = falcon.testing.TestClient(
        create_app(Config(tokens=frozenset({TOKEN})), MemoryStore()),
        headers={"Authorization": f"Bearer {TOKEN}"},
    )
    current = etag(post(client, {"id": 1, **FERN}))
    value, _ = field
    if naming:
        value = f"{value}, {current}"
    named = (current.strip('"'), False) in read(value)
    assert put(client, 1, ROSE, {"If-Match": value}).status_code == (200 if named else 412)
