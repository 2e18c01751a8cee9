"""The one form of a bearer credential the service takes, which the nginx site keys each token's
rate by (deploy/nginx.conf): `Bearer` in any case, one or more spaces, a token of 1 to 128
printable ASCII characters, and spaces or tabs around it (no part of a field's value). Any other
spelling of an accepted token is the 401 for a malformed header: let in, it would have a rate of
its own at the edge, or none.

The header is put into the WSGI environ as a server hands it on (`extras`): Falcon's test client
would strip it with `str.strip()`, which takes NBSP and NEL as well, and gunicorn does not."""

import time

import falcon
import falcon.testing
from hypothesis import given
from hypothesis import strategies as st

from plantstore.api.auth import BearerAuth
from plantstore.tokens.accepted import Tokens

TOKEN_CHARACTERS = st.characters(min_codepoint=0x21, max_codepoint=0x7E)
TOKENS = st.text(TOKEN_CHARACTERS, min_size=1, max_size=128)
SCHEMES = st.tuples(*[st.sampled_from([letter, letter.upper()]) for letter in "bearer"]).map(
    "".join
)
SPACES = st.integers(min_value=1, max_value=8).map(" ".__mul__)
AROUND = st.text(" \t", max_size=3)
#: Whitespace and controls a lenient reader might take for a space (latin-1, as WSGI has it).
NOT_A_SPACE = st.sampled_from(["\t", "\xa0", "\x85", "\v", "\f", "\x1c"])
MALFORMED = "The Authorization header must read 'Bearer <token>'."


class Hello:
    def on_get(self, req, resp):
        resp.media = "hello"


def answer(token: str, authorization: str) -> falcon.testing.Result:
    """What a service that accepts `token` answers `Authorization: <authorization>`."""
    app = falcon.App(middleware=[BearerAuth(Tokens([token]))])
    app.add_route("/plants", Hello())
    client = falcon.testing.TestClient(app)
    return client.simulate_get("/plants", extras={"HTTP_AUTHORIZATION": authorization})


@given(TOKENS, SCHEMES, SPACES, AROUND, AROUND)
def test_every_spelling_of_the_one_form_is_let_in(token, scheme, spaces, before, after):
    assert answer(token, f"{before}{scheme}{spaces}{token}{after}").status_code == 200


@st.composite
def misspellings(draw) -> tuple[str, str]:
    """An accepted token, and a spelling of it that is not the one form."""
    token, scheme, spaces = draw(TOKENS), draw(SCHEMES), draw(SPACES)
    odd = draw(NOT_A_SPACE)
    kind = draw(st.sampled_from(["between", "around", "more", "longer", "outside", "scheme"]))
    if kind == "between":
        cut = draw(st.integers(min_value=0, max_value=len(spaces)))
        spelled = f"{scheme}{spaces[:cut]}{odd}{spaces[cut:]}{token}"
    elif kind == "around":
        odd = odd.replace("\t", "\xa0")
        edge = draw(st.booleans())
        spelled = f"{odd * edge}{scheme}{spaces}{token}{odd * (not edge)}"
    elif kind == "more":
        spelled = f"{scheme}{spaces}{token}{draw(SPACES | NOT_A_SPACE)}{draw(TOKENS)}"
    elif kind == "longer":
        token += draw(st.text(TOKEN_CHARACTERS, min_size=129 - len(token), max_size=200))
        spelled = f"{scheme}{spaces}{token}"
    elif kind == "outside":
        cut = draw(st.integers(min_value=0, max_value=len(token)))
        outside = draw(st.characters(codec="latin-1").filter(lambda c: not " " <= c <= "~"))
        outside = outside.replace("\t", "\x00")  # a tab after the token is allowed
        spelled = f"{scheme}{spaces}{token[:cut]}{outside}{token[cut:]}"
    else:
        scheme = draw(st.sampled_from([scheme[:-1], scheme + "s", f"{scheme}:", "Basic"]))
        spelled = f"{scheme}{spaces}{token}"
    return token, spelled


@given(misspellings())
def test_any_other_spelling_of_an_accepted_token_is_the_malformed_headers_401(misspelled):
    token, spelled = misspelled
    result = answer(token, spelled)
    assert result.status_code == 401
    assert result.json["description"] == MALFORMED
    assert result.headers["www-authenticate"] == 'Bearer realm="plantstore"'


def test_a_header_of_hostile_length_is_refused_at_once():
    """Each character has one way to match: no backtracking that grows with the header, which
    would hold the worker's GIL (gunicorn passes on field values of up to 8190 bytes)."""
    hostile = ["Bearer " + " " * 100_000, "Bearer " + "a" * 100_000 + "\t", " \t" * 50_000]
    started = time.perf_counter()
    assert [answer("a", spelled).status_code for spelled in hostile] == [401] * 3
    assert time.perf_counter() - started < 1
