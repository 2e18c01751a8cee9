"""The tokens file (`PLANTSTORE_TOKENS_FILE`): a token a line, each with a name and scopes.

    # name and scopes are optional; no scopes= means all of them
    sha256:2c26b46b...6266e7ae name=dashboard scopes=read
    prometheus-scrape-token-kept-in-plain-text name=prometheus scopes=metrics
    an-old-token-line-still-works

The first field is the token itself, or `sha256:` and the 64 lower-case hex digits of the
SHA-256 of its UTF-8 bytes (shortened above): a file of digests is no key to the service when
it is copied. The fields after it, separated by spaces, are `name=` (how the logs name its
client) and `scopes=` (what it may do: `read`, `write`, `metrics`, comma-separated). A bad line
is refused naming the file and the line's number, never its token or digest.

Every line ends with a newline, the last one too: a file rewritten in place (`cat new >
tokens`, an editor) may be read half-written, and its last line cut short, after a digest say,
would read as a line granting every scope. A file without its last newline is refused as not
yet whole: then what is read is always the new file's first lines, each whole.
"""

import hashlib
import os
import re
from collections.abc import Iterable
from pathlib import Path
from typing import NamedTuple

from plantstore.config import ConfigError, is_token

#: What a token may be allowed to do: read plants, change them, read the metrics.
SCOPES = ("read", "write", "metrics")
DIGEST_PREFIX = "sha256:"
_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")
#: A name, as it goes into the logs unquoted.
_NAME = re.compile(r"[A-Za-z0-9._@-]{1,64}")


class Entry(NamedTuple):
    """One accepted token: the digest a request's token is looked up by, and what it may do."""

    #: The 32 bytes of the SHA-256 of the token's UTF-8 bytes.
    digest: bytes
    #: How the logs name the token's client: its `name=`, else its place (`line-4`).
    name: str
    scopes: frozenset[str]
    #: Whether it was given as the token itself rather than as its digest.
    plain: bool

    def line(self) -> str:
        """The entry as a line of the file: its digest, name and scopes, never a token."""
        scopes = ",".join(scope for scope in SCOPES if scope in self.scopes)
        return f"{DIGEST_PREFIX}{self.digest.hex()} name={self.name} scopes={scopes}"


class Version(NamedTuple):
    """What tells one state of the file from another, as `stat` gives it.

    Its change time orders versions: the kernel sets it at every change of the file, and
    nothing sets it back, unlike the modification time (`touch -d`, `cp -p`, `rsync -t`).
    """

    changed_ns: int
    modified_ns: int
    size: int
    inode: int
    device: int


def version_of(path: str) -> Version | None:
    """The version of the file at `path` now; None when it cannot be found."""
    try:
        stat = os.stat(path)
    except OSError:
        return None
    return Version(stat.st_ctime_ns, stat.st_mtime_ns, stat.st_size, stat.st_ino, stat.st_dev)


def listed(tokens: Iterable[str]) -> tuple[Entry, ...]:
    """The entries of the tokens `PLANTSTORE_TOKENS` lists: every scope, named by their place."""
    return tuple(
        Entry(_digest(token), f"PLANTSTORE_TOKENS-{number}", frozenset(SCOPES), plain=True)
        for number, token in enumerate(tokens, start=1)
    )


def line_for(token: str, name: str | None = None, scopes: str | None = None) -> str:
    """The line of the file that accepts `token` and keeps only its digest, with `name=` and
    `scopes=` when given.

    Raises:
        ValueError: the name or the scopes are not as the file takes them; it says how.
    """
    fields = [DIGEST_PREFIX + _digest(token).hex()]
    fields += [f"{key}={value}" for key, value in (("name", name), ("scopes", scopes)) if value]
    _entry(fields, number=1)  # as the file's reader will read it
    return " ".join(fields)


def read_tokens_file(path: str) -> tuple[Entry, ...]:
    """The entries of the file at `path`; blank lines and `#` comments are skipped.

    Raises:
        ConfigError: the file cannot be read, does not end with a newline, or a line is not
            an entry, or names a token another names too; it names the file and the line,
            never a token or a digest.
    """
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as ex:
        raise ConfigError(f"PLANTSTORE_TOKENS_FILE cannot be read: {path}: {ex.strerror}") from None
    except UnicodeDecodeError:
        raise ConfigError(
            f"PLANTSTORE_TOKENS_FILE must be text, one token a line: {path} is not UTF-8"
        ) from None
    return entries_of(text, path)


def entries_of(text: str, path: str) -> tuple[Entry, ...]:
    """The entries of `text`, read from the file at `path`, as `read_tokens_file` says."""
    if text and not text.endswith("\n"):
        raise ConfigError(
            f"PLANTSTORE_TOKENS_FILE: {path} must end with a newline: its last line has none, "
            "as in a file still being written"
        )
    entries: list[Entry] = []
    seen: dict[bytes, int] = {}  # each digest's line
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        try:
            entry = _entry(line.split(), number)
        except ValueError as ex:
            raise ConfigError(f"PLANTSTORE_TOKENS_FILE: {path}, line {number}: {ex}") from None
        if entry.digest in seen:
            raise ConfigError(
                f"PLANTSTORE_TOKENS_FILE: {path}, line {number}: names the token of line "
                f"{seen[entry.digest]} again"
            )
        seen[entry.digest] = number
        entries.append(entry)
    return tuple(entries)


def _entry(fields: list[str], number: int) -> Entry:
    """The entry a line's fields make; ValueError says what is wrong, quoting no token."""
    first, *rest = fields
    hashed = first.startswith(DIGEST_PREFIX)
    if hashed and not _DIGEST.fullmatch(first):
        raise ValueError("a digest is sha256: and 64 lower-case hex digits")
    if not hashed and not is_token(first):
        raise ValueError("a token is 1 to 128 printable ASCII characters without spaces")
    named: dict[str, str] = {}
    for field in rest:
        key, equals, value = field.partition("=")
        if not equals or key not in ("name", "scopes"):
            raise ValueError("a field after the token is name=... or scopes=...")
        if key in named:
            raise ValueError(f"{key}= is given twice")
        named[key] = value
    name = named.get("name", f"line-{number}")
    if not _NAME.fullmatch(name):
        raise ValueError("a name is 1 to 64 of A-Z a-z 0-9 . _ @ -")
    scopes = frozenset(named["scopes"].split(",")) if "scopes" in named else frozenset(SCOPES)
    if not scopes or not scopes <= set(SCOPES):
        raise ValueError(f"scopes= lists {', '.join(SCOPES)}, separated by commas")
    digest = bytes.fromhex(first.removeprefix(DIGEST_PREFIX)) if hashed else _digest(first)
    return Entry(digest, name, scopes, plain=not hashed)


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode()).digest()
