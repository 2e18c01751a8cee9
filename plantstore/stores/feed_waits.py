"""How a worker's requests wait for the feed's next event: woken at once by a commit of their
own process, and looking again every `POLL_SECONDS`, for the commits of other processes and
hosts, and for one that came between a request's last look and its wait."""

import threading

#: Seconds a request waits for the feed before it looks again.
POLL_SECONDS = 0.25


class FeedWaits:
    """The requests of one process that wait for a change to be committed."""

    def __init__(self, poll: float = POLL_SECONDS) -> None:
        self._poll = poll
        self._changed = threading.Condition()
        self._commits = 0
        self._stopped = False

    def committed(self) -> None:
        """A change was committed in this process: wake every wait."""
        with self._changed:
            self._commits += 1
            self._changed.notify_all()

    def wait(self, timeout: float) -> bool:
        """Sleep until the next commit of this process, at most `timeout` seconds and `poll`;
        False, at once, once stopped."""
        with self._changed:
            commits = self._commits
            self._changed.wait_for(
                lambda: self._stopped or self._commits != commits, min(timeout, self._poll)
            )
            return not self._stopped

    def stop(self) -> None:
        """End every wait, now and from now on."""
        with self._changed:
            self._stopped = True
            self._changed.notify_all()
