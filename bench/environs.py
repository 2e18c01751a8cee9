"""The requests the benchmark sends, as WSGI environs built ahead and replayed.

The app is called the way gunicorn calls it, `app(environ, start_response)`, and every answer's
status is checked: a run that got a wrong status measured something else, so it is invalid.
"""

import io
from collections.abc import Callable, Iterable

import falcon.testing

from plantstore.config import Config

TOKEN = "bench-token"
CONFIG = Config(tokens=frozenset({TOKEN}))
JSON_HEADERS = {"Content-Type": "application/json"}
AUTHORIZED = {**JSON_HEADERS, "Authorization": f"Bearer {TOKEN}"}
READER = {"Authorization": f"Bearer {TOKEN}"}

#: Plants put in a store ahead of a measurement carry one of this many tags.
TAGS = 100


class InvalidRun(RuntimeError):
    """An answer had another status than the one measured."""


def tag_of(plant_id: int) -> str:
    """The tag of a plant put in a store ahead: one of `TAGS` values, `t0` to `t99`."""
    return f"t{plant_id % TAGS}"


def plant_body(plant_id: int, tag: str = "tree") -> bytes:
    """A `NewPlant` of the benchmark's shape: `plant-123456`, tag `tree` unless told."""
    return b'{"id":%d,"name":"plant-%d","tag":"%s"}' % (plant_id, plant_id, tag.encode())


def replacement_body(plant_id: int, version: int) -> bytes:
    """A `Plant` that renames `plant_body(plant_id)`: `plant-123456-v7`, tag `tree`.

    Each version is another name, so a `PUT` of it replaces the plant with one that differs.
    """
    return b'{"name":"plant-%d-v%d","tag":"tree"}' % (plant_id, version)


def invalid_body(plant_id: int) -> bytes:
    """A body the schema refuses (400): `id` is a string."""
    return b'{"id":"%d","name":"plant-%d"}' % (plant_id, plant_id)


class Replayer:
    """Environs of one method and headers: one template, copied per request.

    A body is a stream that can be read once, so every request gets a fresh one; a request
    without a body has no Content-Length, as gunicorn passes a GET on.
    """

    def __init__(self, headers: dict[str, str], method: str = "POST") -> None:
        self._template = falcon.testing.create_environ(
            path="/plants", method=method, headers=headers
        )
        self._template.pop("CONTENT_LENGTH", None)

    def environ(self, body: bytes | None = None, path: str = "/plants", query: str = "") -> dict:
        environ = self._template.copy()
        environ["PATH_INFO"] = path
        environ["QUERY_STRING"] = query
        environ["wsgi.input"] = io.BytesIO(body or b"")
        if body is not None:
            environ["CONTENT_LENGTH"] = str(len(body))
        return environ


def call(app: Callable, environ: dict) -> int:
    """Answer one request as a WSGI server would and give its status code."""
    statuses = []
    result = app(environ, lambda status, headers, exc_info=None: statuses.append(status))
    try:
        for _ in result:
            pass
    finally:
        close = getattr(result, "close", None)
        if close:
            close()
    return int(statuses[-1][:3])


def replay(app: Callable, environs: Iterable[dict], expected: int) -> None:
    """Answer every request; raise `InvalidRun` at the first with another status."""
    for environ in environs:
        status = call(app, environ)
        if status != expected:
            request = f"{environ['REQUEST_METHOD']} {environ['PATH_INFO']}"
            raise InvalidRun(f"{request} answered {status}, not {expected}")


def create(app: Callable, first_id: int, count: int) -> None:
    """Create `count` plants through the app's own request path, as clients would.

    Each carries one of `TAGS` tags, so the store's tag index holds what a real one would.
    """
    replayer = Replayer(AUTHORIZED)
    bodies = (plant_body(i, tag_of(i)) for i in range(first_id, first_id + count))
    replay(app, (replayer.environ(body) for body in bodies), 200)
