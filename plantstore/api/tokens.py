"""The tokens a request may bear: those `PLANTSTORE_TOKENS` lists, and the tokens file's, read
again whenever it changes."""

import hmac
import logging
import os
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path

from plantstore.config import ConfigError, is_token

#: Seconds between two looks at whether the tokens file changed.
CHECK_INTERVAL = 1.0

_log = logging.getLogger(__name__)


def read_tokens_file(path: str) -> frozenset[str]:
    """The tokens in the file at `path`: one a line, blank lines and `#` comments skipped.

    A bad file is a `ConfigError` naming the file, and the line of a refused token, never the
    token itself.
    """
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except OSError as ex:
        raise ConfigError(f"PLANTSTORE_TOKENS_FILE cannot be read: {path}: {ex.strerror}") from None
    except UnicodeDecodeError:
        raise ConfigError(
            f"PLANTSTORE_TOKENS_FILE must be text, one token a line: {path} is not UTF-8"
        ) from None
    tokens = []
    for number, line in enumerate(lines, start=1):
        token = line.strip()
        if not token or token.startswith("#"):
            continue
        if not is_token(token):
            raise ConfigError(
                f"PLANTSTORE_TOKENS_FILE must hold one token of printable ASCII without spaces "
                f"a line (or a # comment): {path}, line {number}, does not"
            )
        tokens.append(token)
    return frozenset(tokens)


class Tokens:
    """The accepted tokens: those listed in `PLANTSTORE_TOKENS`, and the tokens file's.

    A token is rotated by writing the file, with no signal and no restart: every worker looks
    whether it changed (its inode, size, modification and change times) on the thread of a
    request that needs a token, at most once every `interval` seconds of `clock`, and reads a
    changed file again. A file renamed over the old one is read whole; one written in place may
    be read half-written, and is then read again once the writing has changed it further.

    A changed file that cannot be read, holds a line that is not a token, or names none keeps
    the tokens read before: a typo or a half-written file must not lock every client out. That
    is logged in one line, in the words a start with that file stops with (never a token), once
    for each such change. The service's start refuses a bad file (`plantstore.config`); a worker
    started later, while the file is bad, accepts the listed tokens alone until it changes,
    rather than fail to start: a token revoked since the start must not come back.
    """

    def __init__(
        self,
        listed: Iterable[str],
        path: str | None = None,
        clock: Callable[[], float] = time.monotonic,
        interval: float = CHECK_INTERVAL,
    ) -> None:
        self._listed = _encoded(listed)
        self._path = path
        self._clock = clock
        self._interval = interval
        self._lock = threading.Lock()
        self._accepted = self._listed
        if path is not None:
            self._checked = clock()
            self._version = _version(path)
            try:
                self._accepted += _encoded(read_tokens_file(path))
            except ConfigError as ex:
                _log.error(
                    "plantstore: the tokens file is not taken, and only PLANTSTORE_TOKENS' "
                    "tokens are accepted until it changes: %s",
                    ex,
                )

    def accepts(self, candidate: bytes) -> bool:
        """Compare with every token, each in constant time, so timing tells nothing."""
        if self._path is not None:
            self._look_at_the_file()
        accepted = False
        for token in self._accepted:
            accepted |= hmac.compare_digest(token, candidate)
        return accepted

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
        self._accepted = self._listed + _encoded(tokens)
        _log.info("plantstore: the changed tokens file is taken: %s", self._path)


def _version(path: str) -> tuple[int, ...] | None:
    """What tells that the file changed; None when it cannot be found."""
    try:
        stat = os.stat(path)
    except OSError:
        return None
    return (stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns)


def _encoded(tokens: Iterable[str]) -> tuple[bytes, ...]:
    return tuple(token.encode() for token in tokens)
