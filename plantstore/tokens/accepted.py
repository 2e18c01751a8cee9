"""The tokens a request may bear: those `PLANTSTORE_TOKENS` lists, and the tokens file's, read
again whenever it changes."""

import hashlib
import logging
import threading
import time
from collections.abc import Callable, Iterable

from plantstore.config import ConfigError
from plantstore.tokens.file import Entry, listed, read_tokens_file, version_of
from plantstore.tokens.last_good import LastGood, LastGoodTokens

#: Seconds between two looks at whether the tokens file changed.
CHECK_INTERVAL = 1.0

_log = logging.getLogger(__name__)


class Tokens:
    """The accepted tokens: those listed in `PLANTSTORE_TOKENS`, and the tokens file's.

    A token is rotated by writing the file, with no signal and no restart: a request that needs
    a token looks, at most once every `interval` seconds, whether the file changed (`Version`),
    and reads it again. A bad file (unreadable, a line that is no token, or changed to name
    none) must not lock every client out, nor bring back a token revoked since: it is not
    taken, the last good tokens stay served (`LastGoodTokens`, shared by the run's processes in
    `kept_in`), and the log says so once for the run, never with a token.
    """

    def __init__(
        self,
        tokens: Iterable[str],
        path: str | None = None,
        clock: Callable[[], float] = time.monotonic,
        interval: float = CHECK_INTERVAL,
        kept_in: str | None = None,
    ) -> None:
        self._listed = {entry.digest: entry for entry in listed(tokens)}
        self._accepted = self._listed
        self._path = path
        self._clock = clock
        self._interval = interval
        self._lock = threading.Lock()
        self._last_good = LastGoodTokens(kept_in) if kept_in and path else None
        if path is None:
            return
        self._checked = clock()
        #: The version of the file as last looked at, and the one whose tokens are served.
        self._version = self._served = None
        last_good = self._last_good.read() if self._last_good else None
        if last_good is not None:
            self._serve(last_good)
            self._version = last_good.version
        self._read_if_changed(first=last_good is None)

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

    def _read_if_changed(self, first: bool = False) -> None:
        """Take the file if it changed since it was last looked at (or at a `first` read) and
        is good; else serve the last good tokens.

        A file that names no token is taken at a first read, as the start took it (with
        tokens in `PLANTSTORE_TOKENS`), and not as a change: `cat new > tokens` empties the
        file before it writes it.
        """
        version = version_of(self._path)
        if version == self._version and not first:
            return
        self._version = version
        try:
            entries = read_tokens_file(self._path)
            if not entries and not first:
                raise ConfigError(f"PLANTSTORE_TOKENS_FILE names no token: {self._path}")
        except ConfigError as ex:
            self._serve_the_last_good(ex)
            return
        self._serve(LastGood(version, entries))
        if self._last_good:
            self._last_good.keep(version, entries, self._path)
        if not first:
            _log.info("plantstore: the changed tokens file is taken: %s", self._path)

    def _serve(self, good: LastGood) -> None:
        """Accept the tokens of a good version of the file, and the listed ones, which win."""
        self._accepted = {**{entry.digest: entry for entry in good.entries}, **self._listed}
        self._served = good.version

    def _serve_the_last_good(self, why: ConfigError) -> None:
        """The file is not taken: serve the run's last good tokens if they are newer than
        those served, and say so, once for the run."""
        last_good = self._last_good.read() if self._last_good else None
        if last_good and (
            self._served is None or last_good.version.changed_ns > self._served.changed_ns
        ):
            self._serve(last_good)
        if self._last_good and not self._last_good.first_to_say(self._version):
            return
        if self._served is None:
            served = "only PLANTSTORE_TOKENS' tokens are accepted"
        else:
            changed = time.localtime(self._served.changed_ns // 10**9)
            served = (
                "the tokens of its last good version, changed at "
                f"{time.strftime('%Y-%m-%d %H:%M:%S %z', changed)}, stay accepted"
            )
        _log.error(
            "plantstore: the tokens file is not taken, and %s until it changes: %s", served, why
        )
