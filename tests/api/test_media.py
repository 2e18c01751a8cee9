"""A body's `Content-Type` is read as Falcon's `parse_header` reads it, but in time linear in
its length: Falcon's takes quadratic time on a field of `;` inside a quote, holding the GIL."""

import json

import falcon
import pytest
from hypothesis import given
from hypothesis import strategies as st

from plantstore.api.media import media_type_and_parameters
from tests.api.test_put import FERN
from tests.support.linear_time import LONGEST, assert_linear

#: Pieces of a `Content-Type`, most of them what Falcon's reading turns on.
PIECES = st.sampled_from(
    ["application/json", "charset", "utf-8", "=", ";", '"', "\\", " ", "\t", "a", "A"]
)


@given(st.lists(PIECES, max_size=12).map("".join))
def test_a_content_type_is_read_as_falcon_reads_it(value):
    assert media_type_and_parameters(value) == falcon.parse_header(value)


@given(st.text(st.characters(codec="latin-1"), max_size=30))
def test_any_field_is_read_as_falcon_reads_it(value):
    assert media_type_and_parameters(value) == falcon.parse_header(value)


#: Fields as long as `n` makes them, and the status a `PUT` with each answers. In all but the
#: last, parameters are named more than once, which is refused; the last's are all different.
LONG = {
    "semicolons inside a quote": (lambda n: 'application/json; a="' + ";" * n, 415),
    "quotes in turn": (lambda n: "application/json" + ';a="' * n, 415),
    "empty parameters, then a quote": (lambda n: "application/json" + ";" * n + '"', 415),
    "escaped quotes inside a quote": (lambda n: 'application/json; a="' + '\\";' * n, 415),
    "named parameters inside a quote": (
        lambda n: 'application/json; a="' + "".join(f";{name}" for name in range(n)),
        200,
    ),
}


@pytest.mark.parametrize(("family", "status"), LONG.values(), ids=list(LONG))
def test_a_long_content_type_is_judged_in_linear_time(client, family, status):
    def put(content_type: str):
        return client.simulate_put("/plants/1", body=json.dumps(FERN), content_type=content_type)

    assert_linear(put, family)
    assert put(family(LONGEST)).status_code == status
