"""Each setting's default, and each number's bounds: docs/configuration.md says why each."""

DEFAULT_MAX_BODY_BYTES = 65536
#: gunicorn's own default for `forwarded_allow_ips`: the proxies trusted, unless configured.
DEFAULT_FORWARDED_ALLOW_IPS = ("127.0.0.1", "::1")
#: The URL of the memory store, `PLANTSTORE_STORE`'s default.
MEMORY_URL = "memory://"
DEFAULT_STORE = MEMORY_URL
#: Threads in each gunicorn worker of a shared store, as gunicorn.conf.py runs it unless told
#: otherwise: enough for its batches to grow with the load (all but one may wait on a batch).
DEFAULT_THREADS = 32
#: Threads in the memory store's worker, unless told otherwise: its requests only compute, so
#: more threads than the one core it runs on only hand the GIL round and lengthen the tail;
#: with four, one may hold a follower's long poll while three serve.
MEMORY_THREADS = 4
#: Seconds a start waits for its store to be reached, unless configured.
DEFAULT_STORE_WAIT = 10
#: Seconds the feed keeps an event, unless configured: a week.
DEFAULT_EVENTS_RETENTION = 7 * 86400

#: Seconds one webhook delivery attempt may take, connecting and answering, unless configured.
DEFAULT_WEBHOOK_TIMEOUT = 5
#: Seconds after an event's creation after which a failing delivery is given up: a day.
DEFAULT_WEBHOOK_GIVE_UP_AFTER = 86400
#: Each number's default, least and greatest value.
NUMBERS = {
    "PLANTSTORE_MAX_BODY_BYTES": (DEFAULT_MAX_BODY_BYTES, 1, 16 * 1024 * 1024),
    "PLANTSTORE_STORE_WAIT": (DEFAULT_STORE_WAIT, 0, 3600),
    "PLANTSTORE_WEBHOOK_TIMEOUT": (DEFAULT_WEBHOOK_TIMEOUT, 1, 300),
    "PLANTSTORE_WEBHOOK_GIVE_UP_AFTER": (DEFAULT_WEBHOOK_GIVE_UP_AFTER, 0, 30 * 86400),
    "PLANTSTORE_EVENTS_RETENTION": (DEFAULT_EVENTS_RETENTION, 60, 366 * 86400),
}
LOG_FORMATS = ("text", "json")


def feed_waits_for(threads: int) -> int:
    """Requests of a worker of `threads` that may wait for the feed's next event at once
    (`GET /events?wait=`): a quarter of them, one at least, so that waits never starve it."""
    return max(1, threads // 4)
