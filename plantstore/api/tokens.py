"""The tokens a request may bear: those `PLANTSTORE_TOKENS` lists, and the tokens file's, read
again whenever it changes."""

import hashlib
import logging
import os
import threading
import time
from collections.abc import Callable, Iterable

from plantstore.api.token_file import Entry, listed, read_tokens_file
from plantstore.config import ConfigError

#: Seconds between two looks at whether the tokens file changed.
CHECK_INTERVAL = 1.0

_log = logging.getLogger(__name__)


class Tokens:
    """The accepted tokens: those listed in `PLANTSTORE_TOKENS`, and the tokens file's.

    A token is rotated by writing the file, with no signal and no restart: every worker looks
    whether it changed (its inode, size, modification and change times) on the thread of a
    request that needs a token, at most once every `interval` seconds of `clock`, and reads a
    changed file again. A file renamed over the old one is read whole. One written in place may
    be read half-written: cut within a line, it is not taken (it lacks its last newline); cut
    at a line's end, it grants what the new file's first lines grant; either way it is read
    again once the writing has changed it further.

    A changed file that cannot be read, holds a line that is not a token, or names none keeps
    the tokens read before: a typo or a half-written file must not lock every client out. That
    is logged in one line, in the words a start with that file stops with (never a token), once
    for each such change. The service's start refuses a bad file (`plantstore.config`); a worker
    started later, while the file is bad, accepts the listed tokens alone until it changes,
    rather than fail to start: a token revoked since the start must not come back.
    """

    def __init__(
        self,
        tokens: Iterable[str],
        path: str | None = None,
        clock: Callable[[], float] = time.monotonic,
        interval: float = CHECK_INTERVAL,
    ) -> None:
        self._listed = {entry.digest: entry for entry in listed(tokens)}
        self._path = path
        self._clock = clock
        self._interval = interval
        self._lock = threading.Lock()
        self._accepted = self._listed
        if path is not None:
            self._checked = clock()
            self._version = _version(path)
            try:
                self._accept(read_tokens_file(path))
            except ConfigError as ex:
                _log.error(
                    "plantstore: the tokens file is not taken, and only PLANTSTORE_TOKENS' "
                    "tokens are accepted until it changes: %s",
                    ex,
                )

    def find(self, candidate: bytes) -> Entry | None:
        """The entry of the token a request bears, or None.

        The token's SHA-256 is looked up among the entries' digests: one dict lookup, which
        costs the same however many entries there are, known token or not, and whose timing
        tells of the one-way digest alone, never of the token. A digest sent as a token is no
        token: its own digest is no entry's.
        """
        if self._path is not None:
            self._look_at_the_file()
        return self._accepted.get(hashlib.sha256(candidate).digest())

    def _accept(self, entries: Iterable[Entry]) -> None:
        """Accept the file's `entries` with the listed tokens, whose entries win over them."""
        self._accepted = {**{entry.digest: entry for entry in entries}, **self._listed}

    def _look_at_the_file(self) -> None:
        """Once an interval, read the file again if it changed; other threads do not wait."""
        now = self._clock()
        if now - self._checked < self._interval or not self._lock.acquire(blocking=False):
            return
        try:
            if now - self._checked >= self._interval:
                self._checked = now
                self._read_if_changed()
        finally:
            self._lock.release()

    def _read_if_changed(self) -> None:
        version = _version(self._path)
        if version == self._version:
            return
        self._version = version
        try:
            tokens = read_tokens_file(self._path)
            if not tokens:
                raise ConfigError(f"PLANTSTORE_TOKENS_FILE names no token: {self._path}")
        except ConfigError as ex:
            _log.error(
                "plantstore: the changed tokens file is not taken, and the tokens read before "
                "stay accepted: %s",
                ex,
            )
            return
        self._accept(tokens)
        _log.info("plantstore: the changed tokens file is taken: %s", self._path)


def _version(path: str) -> tuple[int, ...] | None:
    """What tells that the file changed; None when it cannot be found."""
    try:
        stat = os.stat(path)
    except OSError:
        return None
    return (stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns)
