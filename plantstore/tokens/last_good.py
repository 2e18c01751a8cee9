"""The run's last good tokens: the tokens file as a process of the run last took it, for a
worker that finds the file bad.

gunicorn's master forks a worker whenever one dies and at each SIGHUP; a worker started while
the file is bad cannot read its tokens there, and the master cannot know them: between two
forks the file may go good A, good B revoking a token, bad C, and a worker forked then must
accept B's tokens, not A's. So whoever takes a good file (the master at the start, a worker at
its start or at a change) keeps a copy of it in a directory the master made for the run, which
only this user may enter, and a worker that finds the file bad serves that copy.

The copy is in the tokens file's own format, with digests alone (never a token), after a line
with the version of the file it was read from. It is replaced whole (written beside, then
renamed over) under a lock, and never by an older version once the file has moved on: two
workers that took B and C may keep them in either order.
"""

import contextlib
import fcntl
import logging
import os
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import NamedTuple

from plantstore.config import ConfigError
from plantstore.tokens.file import Entry, Version, entries_of, read_tokens_file, version_of

_VERSION_LINE = "# version "

_log = logging.getLogger(__name__)


class LastGood(NamedTuple):
    """A good version of the tokens file, and its entries."""

    version: Version
    entries: tuple[Entry, ...]


class LastGoodTokens:
    """The copy kept in `directory`, shared by the run's processes."""

    def __init__(self, directory: str) -> None:
        self._directory = Path(directory)
        self._copy = self._directory / "tokens"
        #: The version of the bad file that the log last said was not taken.
        self._said = self._directory / "said"

    def read(self) -> LastGood | None:
        """The copy, or None when none was kept."""
        try:
            text = self._copy.read_text(encoding="utf-8")
            return LastGood(_version_in(text), entries_of(text, str(self._copy)))
        except (OSError, ConfigError, ValueError, TypeError):
            return None

    def take(self, path: str) -> None:
        """Keep the file at `path` as it is now, if it is good: what the master read at the
        start, for its first workers (it may turn bad before they read it)."""
        version = version_of(path)
        with contextlib.suppress(ConfigError):
            self.keep(version, read_tokens_file(path), path)

    def keep(self, version: Version | None, entries: Iterable[Entry], path: str) -> None:
        """Keep `entries`, read from the file at `path` when it was at `version`.

        Unless the copy is of a later version and the file has changed since `version`: a
        worker that read the file before another must not bring back a token the other saw
        revoked. A file that is still at `version` replaces any copy, whatever its time says
        (a clock set back).
        """
        if version is None:  # the file was gone when looked at, and came back to be read
            return
        try:
            with self._locked():
                kept = self._kept_version()
                if kept == version or (
                    kept is not None
                    and kept.changed_ns >= version.changed_ns
                    and version_of(path) != version
                ):
                    return
                self._replace_the_copy(version, entries)
                self._said.unlink(missing_ok=True)
        except OSError as ex:
            _log.warning(
                "plantstore: the last good tokens cannot be kept in %s: %s",
                self._directory,
                ex.strerror,
            )

    def first_to_say(self, version: Version | None) -> bool:
        """Whether the log is still to say that the file at `version` is not taken: each
        process of the run finds it bad, and one line says it for all."""
        said = repr(version)
        try:
            with self._locked():
                if self._said.exists() and self._said.read_text() == said:
                    return False
                self._said.write_text(said)
        except OSError:
            pass
        return True

    def _replace_the_copy(self, version: Version, entries: Iterable[Entry]) -> None:
        """Write the copy beside the old one and rename it over: a reader finds either."""
        lines = [_VERSION_LINE + " ".join(map(str, version)) + "\n"]
        lines += [entry.line() + "\n" for entry in entries]
        descriptor, written = tempfile.mkstemp(dir=self._directory)
        try:
            with os.fdopen(descriptor, "w", encoding="utf-8") as file:
                file.writelines(lines)
            os.replace(written, self._copy)
        finally:
            Path(written).unlink(missing_ok=True)

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        """Hold the run's lock on the copy: one process at a time compares and replaces."""
        with open(self._directory / "lock", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            yield

    def _kept_version(self) -> Version | None:
        try:
            with open(self._copy, encoding="utf-8") as copy:
                return _version_in(copy.readline())
        except (OSError, ValueError, TypeError):
            return None


def _version_in(text: str) -> Version:
    """The version the copy's first line gives; ValueError or TypeError when it gives none."""
    first = text.partition("\n")[0]
    if not first.startswith(_VERSION_LINE):
        raise ValueError("no version")
    return Version(*map(int, first.removeprefix(_VERSION_LINE).split()))
