"""The accepted tokens (`plantstore.tokens.accepted.Tokens`): found by their digest, whatever
the number of entries; never more than a file grants, read half-written."""

import gc
import hashlib
import sys

import pytest

from plantstore.tokens.accepted import CHECK_INTERVAL, Tokens
from tests.support.clock import Clock
from tests.support.tokens_file import rewrite


def digest(token: str) -> str:
    return "sha256:" + hashlib.sha256(token.encode()).hexdigest()


def operations(call) -> list[tuple]:
    """What `call()` makes the interpreter do: each bytecode it runs of Python code (by function
    and offset), and each function of C it calls. The same list for two calls is the same work,
    step by step: a loop over entries, in Python or in a C function called once an entry,
    shows as many steps as it has turns. The garbage collector waits meanwhile: its callbacks
    (hypothesis installs one) would run whenever it happened to collect."""
    done = []

    def trace(frame, event, arg):
        frame.f_trace_opcodes = True
        done.append((event, frame.f_code.co_qualname, frame.f_lasti))
        return trace

    def profile(frame, event, arg):
        if event == "c_call":
            done.append((event, arg.__qualname__))

    before = sys.gettrace(), sys.getprofile()  # a debugger's or a coverage tool's
    collecting = gc.isenabled()
    gc.disable()
    sys.setprofile(profile)
    sys.settrace(trace)
    try:
        call()
    finally:
        sys.settrace(before[0])
        sys.setprofile(before[1])
        if collecting:
            gc.enable()
    return done


@pytest.fixture
def tokens_of(tmp_path):
    """Tokens of a file of `count` digests, the first of `known`, on a clock that stays."""

    def make(count: int) -> Tokens:
        path = tmp_path / f"tokens-{count}"
        lines = [f"{digest('known')} name=known scopes=read\n"]
        lines += [f"{digest(f'other-{number}')} scopes=write\n" for number in range(1, count)]
        path.write_text("".join(lines))
        return Tokens(["listed"], str(path), Clock())

    return make


def test_a_token_is_found_in_as_many_steps_among_100000_entries_as_among_one(tokens_of):
    one, many = tokens_of(1), tokens_of(100_000)
    assert many.find(b"other-99999").scopes == {"write"}
    for candidate in (b"known", b"unknown", b"listed", digest("known").encode()):
        found = one.find(candidate)
        assert many.find(candidate) == found
        steps = operations(lambda candidate=candidate: one.find(candidate))
        assert operations(lambda candidate=candidate: many.find(candidate)) == steps
        assert len(steps) < 100
    known = operations(lambda: many.find(b"known"))
    assert operations(lambda: many.find(b"unknown")) == known


#: Each token's scopes in the file before it is rewritten in place, and after. Today's reader
#: took a cut right after a digest for a line of every scope.
OLD = {"reader": {"read"}, "importer": {"read", "write"}}
NEW = {"importer": {"write"}, "reader": {"read"}, "scraper": {"metrics"}}


def tokens_text(scopes_of: dict[str, set[str]]) -> bytes:
    lines = [f"{digest(t)} name={t} scopes={','.join(sorted(s))}\n" for t, s in scopes_of.items()]
    return "".join(["# rotated\n", *lines]).encode()


def granted(tokens: Tokens, token: str) -> frozenset[str]:
    found = tokens.find(token.encode())
    return frozenset() if found is None else found.scopes


def test_a_file_read_half_written_never_grants_more_than_the_old_or_the_new_file(tmp_path):
    """The file rewritten in place, as `cat new > tokens` does, is read at each length of the
    new content: by a worker that had read the old file, and by one that starts then, with the
    last good tokens the first one kept."""
    path = tmp_path / "tokens"
    rewrite(path, tokens_text(OLD))
    clock = Clock()
    running = Tokens([], str(path), clock, kept_in=str(tmp_path))
    new = tokens_text(NEW)
    for length in range(len(new) + 1):
        rewrite(path, new[:length])
        clock.now += CHECK_INTERVAL
        for tokens in (running, Tokens([], str(path), clock, kept_in=str(tmp_path))):
            for token in OLD | NEW:
                scopes = granted(tokens, token)
                assert scopes <= OLD.get(token, set()) or scopes <= NEW.get(token, set()), (
                    new[:length],
                    token,
                )
    assert {token: granted(running, token) for token in NEW} == NEW
