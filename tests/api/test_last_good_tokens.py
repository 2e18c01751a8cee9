"""The run's last good tokens: what a worker serves while the tokens file is bad, whenever it
started, and the copy of the file kept for it."""

import logging
import re
import stat
from pathlib import Path

import pytest

from plantstore.tokens.accepted import CHECK_INTERVAL, Tokens
from plantstore.tokens.file import SCOPES, Version, read_tokens_file, version_of
from plantstore.tokens.last_good import LastGoodTokens
from tests.api.test_tokens import digest, granted
from tests.support.clock import Clock
from tests.support.tokens_file import changed_at, rewrite

BAD = "new-token\nnot a token\n"
#: Why the file's reader refuses BAD.
BADLINE = "line 2: a field after the token is name=... or scopes=..."


@pytest.fixture
def tokens_file(tmp_path):
    path = tmp_path / "tokens"
    rewrite(path, f"reader scopes=read\n{digest('writer')} name=importer scopes=read,write\n")
    return path


@pytest.fixture
def kept_in(tmp_path):
    """The directory gunicorn's master makes for the run."""
    directory = tmp_path / "kept"
    directory.mkdir(mode=0o700)
    return str(directory)


@pytest.fixture
def clock():
    return Clock()


def test_a_worker_started_while_the_file_is_bad_serves_the_last_good_tokens(
    tokens_file, kept_in, clock, caplog
):
    Tokens([], str(tokens_file), clock, kept_in=kept_in)
    good = changed_at(tokens_file)
    rewrite(tokens_file, BAD)
    started = Tokens(["listed"], str(tokens_file), clock, kept_in=kept_in)
    assert granted(started, "reader") == {"read"}
    assert granted(started, "writer") == {"read", "write"}
    assert started.find(b"writer").name == "importer"
    assert (granted(started, "listed"), granted(started, "new-token")) == (set(SCOPES), set())
    assert [(record.levelno, record.getMessage()) for record in caplog.records] == [
        (
            logging.ERROR,
            f"plantstore: the tokens file is not taken, and the tokens of its last good version, "
            f"changed at {good}, stay accepted until it changes: PLANTSTORE_TOKENS_FILE: "
            f"{tokens_file}, {BADLINE}",
        )
    ]
    for secret in ("reader", "writer", digest("writer")[7:], "not a token"):
        assert secret not in caplog.text


def test_a_token_revoked_by_a_good_version_stays_revoked_once_the_file_turns_bad(
    tokens_file, kept_in, clock
):
    """Good A, good B revoking `reader`, bad C: a worker that read A and missed B, the one
    that took B, and one started during C all serve B."""
    read_a = Tokens([], str(tokens_file), clock, kept_in=kept_in)
    took_b = Tokens([], str(tokens_file), clock, kept_in=kept_in)
    rewrite(tokens_file, f"{digest('writer')} name=importer scopes=write\n")
    clock.now += CHECK_INTERVAL
    assert granted(took_b, "reader") == set()
    rewrite(tokens_file, BAD)
    started_in_c = Tokens([], str(tokens_file), clock, kept_in=kept_in)
    clock.now += CHECK_INTERVAL
    for tokens in (read_a, took_b, started_in_c):
        assert (granted(tokens, "reader"), granted(tokens, "writer")) == (set(), {"write"})


def test_the_run_says_once_a_change_that_the_file_is_not_taken(tokens_file, kept_in, clock, caplog):
    """However many workers find it bad, those running and those started while it is."""
    workers = [Tokens([], str(tokens_file), clock, kept_in=kept_in) for _ in range(3)]
    for content in (BAD, "reader\n", BAD, "# none\n"):
        rewrite(tokens_file, content)
        clock.now += CHECK_INTERVAL
        workers.append(Tokens([], str(tokens_file), clock, kept_in=kept_in))
        assert all(granted(tokens, "reader") for tokens in workers)
    errors = [record.getMessage() for record in caplog.records if record.levelno == logging.ERROR]
    assert [error.partition("until it changes: ")[2] for error in errors] == [
        f"PLANTSTORE_TOKENS_FILE: {tokens_file}, {BADLINE}",
        f"PLANTSTORE_TOKENS_FILE: {tokens_file}, {BADLINE}",
        f"PLANTSTORE_TOKENS_FILE names no token: {tokens_file}",
    ]


def test_the_copy_holds_digests_names_and_scopes_and_never_a_token(tokens_file, kept_in):
    Tokens([], str(tokens_file), kept_in=kept_in)
    copy = Path(kept_in) / "tokens"
    assert stat.S_IMODE(copy.stat().st_mode) == 0o600
    text = copy.read_text()
    assert "reader" not in text
    lines = [line for line in text.splitlines() if not line.startswith("#")]
    assert len(lines) == 2
    assert all(re.fullmatch(r"sha256:[0-9a-f]{64} name=\S+ scopes=\S+", line) for line in lines)
    kept = LastGoodTokens(kept_in).read()
    assert kept.version == version_of(str(tokens_file))
    assert [entry._replace(plain=True) for entry in kept.entries] == [
        entry._replace(plain=True) for entry in read_tokens_file(str(tokens_file))
    ]


def version(changed_ns: int) -> Version:
    return Version(changed_ns, changed_ns, 1, 1, 1)


def names(kept_in: str) -> list[str]:
    return [entry.name for entry in LastGoodTokens(kept_in).read().entries]


@pytest.mark.parametrize("newer_first", [True, False])
def test_an_older_version_never_replaces_a_newer_one_once_the_file_moved_on(
    tokens_file, kept_in, newer_first
):
    """Two workers took B and C, then the file changed again: they keep them in either order."""
    (entry,) = read_tokens_file(str(tokens_file))[:1]
    taken = [(version(2000), entry._replace(name="B")), (version(3000), entry._replace(name="C"))]
    for taken_version, taken_entry in reversed(taken) if newer_first else taken:
        LastGoodTokens(kept_in).keep(taken_version, [taken_entry], str(tokens_file))
    assert names(kept_in) == ["C"]


def test_the_file_as_it_is_now_replaces_a_copy_whatever_its_time(tokens_file, kept_in):
    """A clock set back makes the new file look older than the copy: it is what the file holds."""
    (entry,) = read_tokens_file(str(tokens_file))[:1]
    later = version(version_of(str(tokens_file)).changed_ns + 10**12)
    LastGoodTokens(kept_in).keep(later, [entry._replace(name="before")], str(tokens_file))
    LastGoodTokens(kept_in).take(str(tokens_file))
    assert names(kept_in) == ["line-1", "importer"]


def test_the_master_keeps_a_good_file_and_not_a_bad_one(tokens_file, kept_in):
    rewrite(tokens_file, BAD)
    LastGoodTokens(kept_in).take(str(tokens_file))
    assert LastGoodTokens(kept_in).read() is None
    rewrite(tokens_file, "reader name=reader\n")
    LastGoodTokens(kept_in).take(str(tokens_file))
    assert names(kept_in) == ["reader"]
