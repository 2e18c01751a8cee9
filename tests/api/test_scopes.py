"""Least privilege: tokens with names and scopes, kept as digests in the tokens file.

A token without the scope an operation needs is 403 with `WWW-Authenticate: Bearer ...,
error="insufficient_scope", scope="..."` (RFC 6750 §3.1); a missing or unknown token stays
401. The file's grammar is checked against lines drawn from it, and from its near misses.
"""

import dataclasses
import hashlib
import logging
import re

import falcon.testing
import pytest
from hypothesis import given
from hypothesis import strategies as st

from plantstore.app import create_app
from plantstore.config import ConfigError
from plantstore.stores.memory import MemoryStore
from plantstore.tokens.accepted import Tokens
from plantstore.tokens.file import SCOPES, line_for, read_tokens_file
from tests.support.clock import Clock
from tests.support.tokens_file import rewrite

READER, WRITER, SCRAPER, EVERYTHING = "reader-token", "writer-token", "scraper-token", "all-token"
LOADER = "loader-token"


def digest(token: str) -> str:
    return "sha256:" + hashlib.sha256(token.encode()).hexdigest()


@pytest.fixture
def tokens_file(tmp_path):
    path = tmp_path / "tokens"
    path.write_text(
        "# name and scopes are optional; no scopes= means all of them\n"
        f"{digest(READER)}  name=dashboard  scopes=read\n"
        f"{digest(WRITER)}  name=importer   scopes=read,write\n"
        f"{SCRAPER}  name=prometheus scopes=metrics\n"
        f"{digest(LOADER)}  name=loader     scopes=write\n"
        f"{EVERYTHING}\n"
    )
    return path


@pytest.fixture
def scoped(config, tokens_file):
    app = create_app(dataclasses.replace(config, tokens_file=str(tokens_file)), MemoryStore())
    return falcon.testing.TestClient(app)


def call(client, token, method, path, body=None):
    headers = {} if token is None else {"Authorization": f"Bearer {token}"}
    return client.simulate_request(method, path, headers=headers, json=body)


#: Each operation behind a token, and the scope it needs.
OPERATIONS = [
    ("POST", "/plants", {"id": 7, "name": "fern"}, "write"),
    ("GET", "/plants", None, "read"),
    ("HEAD", "/plants", None, "read"),
    ("GET", "/plants/7", None, "read"),
    ("HEAD", "/plants/7", None, "read"),
    ("PUT", "/plants/7", {"name": "rose"}, "write"),
    ("DELETE", "/plants/7", None, "write"),
    ("GET", "/metrics", None, "metrics"),
]
SCOPES_OF = {
    READER: {"read"},
    WRITER: {"read", "write"},
    SCRAPER: {"metrics"},
    LOADER: {"write"},
    EVERYTHING: {*SCOPES},
}


@pytest.mark.parametrize(("method", "path", "body", "needed"), OPERATIONS)
@pytest.mark.parametrize("token", list(SCOPES_OF))
def test_a_token_calls_what_its_scopes_allow_and_is_403_naming_the_scope_else(
    scoped, token, method, path, body, needed
):
    result = call(scoped, token, method, path, body)
    if needed in SCOPES_OF[token]:
        assert result.status_code not in (401, 403)
        return
    assert result.status_code == 403
    assert result.headers["www-authenticate"] == (
        f'Bearer realm="plantstore", error="insufficient_scope", scope="{needed}"'
    )
    if method != "HEAD":
        assert result.json == {
            "error": 403,
            "message": "The bearer token is accepted, but not for this: it needs the scope "
            f"{needed}.",
        }
        assert token not in result.text


def test_a_token_gets_exactly_the_scopes_it_lists_so_write_alone_cannot_read(scoped):
    assert call(scoped, LOADER, "POST", "/plants", {"id": 8, "name": "ivy"}).status_code == 200
    assert call(scoped, LOADER, "PUT", "/plants/8", {"name": "fern"}).status_code == 200
    for method, path in [("GET", "/plants"), ("GET", "/plants/8"), ("HEAD", "/plants/8")]:
        assert call(scoped, LOADER, method, path).status_code == 403, (method, path)
    assert call(scoped, LOADER, "GET", "/metrics").status_code == 403
    assert call(scoped, READER, "GET", "/plants/8").status_code == 200


@pytest.mark.parametrize("token", [None, "unknown", digest(READER), digest(READER)[7:]])
def test_a_missing_or_unknown_token_stays_401_and_a_digest_is_no_token(scoped, token):
    result = call(scoped, token, "GET", "/plants")
    assert result.status_code == 401
    assert result.headers["www-authenticate"].startswith('Bearer realm="plantstore"')


def test_what_needs_no_token_needs_no_scope(scoped):
    for path in ("/healthz", "/readyz", "/openapi.json", "/docs"):
        assert call(scoped, None, "GET", path).status_code == 200


def test_a_refusal_for_a_scope_names_the_token_by_its_name_in_the_log(scoped, caplog):
    caplog.set_level(logging.INFO, logger="plantstore.api.auth")
    assert call(scoped, READER, "POST", "/plants", {"id": 1, "name": "fern"}).status_code == 403
    assert [record.getMessage() for record in caplog.records] == [
        "plantstore: token=dashboard may not POST /plants: it lacks the scope write"
    ]
    assert READER not in caplog.text
    assert digest(READER)[7:] not in caplog.text


def test_the_document_says_the_scope_each_operation_needs(scoped):
    paths = scoped.simulate_get("/openapi.json").json["paths"]
    needs = {
        (method.upper(), path.replace("{id}", "7")): operation.get("security")
        for path, methods in paths.items()
        for method, operation in methods.items()
    }
    for method, path, _, needed in OPERATIONS:
        assert needs[method, path] == [{"bearerAuth": [needed]}], (method, path)
        assert "403" in paths[path.replace("/7", "/{id}")][method.lower()]["responses"]


def test_a_changed_file_takes_its_new_scopes_without_a_restart(tokens_file):
    clock = Clock()
    tokens = Tokens([], str(tokens_file), clock)
    assert tokens.find(READER.encode()).scopes == {"read"}
    rewrite(tokens_file, f"{digest(READER)} name=dashboard scopes=read,write\n")
    clock.now += 1
    found = tokens.find(READER.encode())
    assert (found.name, found.scopes) == ("dashboard", {"read", "write"})
    assert tokens.find(WRITER.encode()) is None


# The file's grammar.

TOKENS = st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7E), min_size=1, max_size=20)
NAMES = st.from_regex(r"[A-Za-z0-9._@-]{1,20}", fullmatch=True)
SCOPE_LISTS = st.lists(st.sampled_from(SCOPES), min_size=1, max_size=3, unique=True)


@st.composite
def entries(draw):
    """A valid line, and what it names: token, name (None: none given), scopes (None: none)."""
    token = draw(TOKENS.filter(lambda token: not token.startswith(("#", "sha256:"))))
    name = draw(st.none() | NAMES)
    scopes = draw(st.none() | SCOPE_LISTS)
    first = digest(token) if draw(st.booleans()) else token
    fields = [first]
    if name is not None:
        fields.append(f"name={name}")
    if scopes is not None:
        fields.append(f"scopes={','.join(scopes)}")
    fields = draw(st.permutations(fields[1:])) if draw(st.booleans()) else fields[1:]
    spaces = draw(st.sampled_from([" ", "  ", "\t", " \t "]))
    return spaces.join([first, *fields]), token, name, scopes


@given(st.lists(entries(), max_size=6, unique_by=lambda entry: entry[1]))
def test_every_line_of_the_grammar_reads_as_what_it_says(tmp_path_factory, drawn):
    path = tmp_path_factory.mktemp("file") / "tokens"
    path.write_text("".join(f"{line}\n# a comment\n\n" for line, *_ in drawn))
    tokens = Tokens([], str(path))
    read = read_tokens_file(str(path))
    assert len(read) == len(drawn)
    for number, (_, token, name, scopes) in enumerate(drawn):
        found = tokens.find(token.encode())
        assert found is not None
        assert found.name == (name or f"line-{3 * number + 1}")
        assert found.scopes == frozenset(scopes or SCOPES)


#: Each near miss of a line, and what the refusal says of it.
MISSES = [
    ("{token} role=admin", "a field after the token is name=... or scopes=..."),
    ("{token} scopes=read,admin", "scopes= lists read, write, metrics, separated by commas"),
    ("{token} scopes=", "scopes= lists read, write, metrics, separated by commas"),
    ("{token} name=a name=b", "name= is given twice"),
    ("{token} name=the:importer!", "a name is 1 to 64 of A-Z a-z 0-9 . _ @ -"),
    ("{digest}0", "a digest is sha256: and 64 lower-case hex digits"),
    ("{short}", "a digest is sha256: and 64 lower-case hex digits"),
    ("{upper}", "a digest is sha256: and 64 lower-case hex digits"),
    ("{token} spaced", "a field after the token is name=... or scopes=..."),
]


@given(TOKENS.filter(lambda token: not token.startswith(("#", "sha256:"))), st.data())
def test_a_near_miss_is_refused_naming_the_line_never_the_token(tmp_path_factory, token, data):
    line, why = data.draw(st.sampled_from(MISSES))
    made = line.format(
        token=token,
        digest=digest(token),
        short=digest(token)[:-1],
        upper=digest(token).upper().replace("SHA256", "sha256"),
    )
    path = tmp_path_factory.mktemp("file") / "tokens"
    path.write_text(f"# first\n{made}\n")
    with pytest.raises(ConfigError) as refused:
        read_tokens_file(str(path))
    # All it says, which holds nothing of the line but its number.
    assert str(refused.value) == f"PLANTSTORE_TOKENS_FILE: {path}, line 2: {why}"


@pytest.mark.parametrize(
    "twice", ["{token}\n{token} name=again", "{token}\n{digest}", "{digest}\n{digest}"]
)
def test_two_entries_for_one_token_are_refused(tmp_path, twice):
    path = tmp_path / "tokens"
    path.write_text(twice.format(token=WRITER, digest=digest(WRITER)) + "\n")
    with pytest.raises(ConfigError, match=re.escape(f"{path}, line 2: names the token of line 1")):
        read_tokens_file(str(path))


@given(TOKENS, st.none() | NAMES, st.none() | SCOPE_LISTS)
def test_the_commands_line_holds_the_digest_alone_and_reads_back(token, name, scopes):
    line = line_for(token, name, scopes and ",".join(scopes))
    assert token not in line.split()[1:] and line.split()[0] == digest(token)


def test_nothing_of_a_token_or_a_digest_reaches_the_metrics(scoped):
    for token in (READER, WRITER, "unknown"):
        call(scoped, token, "POST", "/plants", {"id": 1, "name": "fern"})
    scraped = call(scoped, SCRAPER, "GET", "/metrics")
    assert scraped.status_code == 200
    for secret in (READER, WRITER, SCRAPER, "unknown", digest(READER)[7:], digest(WRITER)[7:]):
        assert secret not in scraped.text
