"""Tokens: a fresh one for `plantstore token`, and one for a run whose operator set none."""

import os
import secrets
import tempfile
from pathlib import Path

#: The files made by this process, to remove when it ends.
_made: list[Path] = []


def new() -> str:
    """A fresh random token: 32 random bytes, URL-safe base64 (43 characters)."""
    return secrets.token_urlsafe(32)


def make() -> Path:
    """Write a fresh random token into a new file that only this user can read; give its path.

    The token is not printed: under a service manager the console is the log, and no token
    may reach a log.
    """
    descriptor, name = tempfile.mkstemp(prefix="plantstore-token-")
    with os.fdopen(descriptor, "w") as file:
        file.write(new() + "\n")
    path = Path(name)
    _made.append(path)
    return path


def remove() -> None:
    """Remove the files `make` wrote: their tokens end with the run."""
    while _made:
        _made.pop().unlink(missing_ok=True)
