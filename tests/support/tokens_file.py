"""A tokens file as an operator rewrites it, each rewrite with a modification time of its own,
and when the log says it changed: for the tests of tokens, and of what gunicorn logs of them."""

import itertools
import os
import time

#: Modification times of their own for each rewrite, which a test may make within one tick of
#: the file system's clock.
_mtimes = itertools.count(10**18, 10**9)


def rewrite(path, content: str | bytes) -> None:
    if isinstance(content, str):
        content = content.encode()
    path.write_bytes(content)
    mtime = next(_mtimes)
    os.utime(path, ns=(mtime, mtime))


def changed_at(path) -> str:
    """When the file at `path` was last changed, as the log says it."""
    changed = time.localtime(path.stat().st_ctime_ns // 10**9)
    return time.strftime("%Y-%m-%d %H:%M:%S %z", changed)
