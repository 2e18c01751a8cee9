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


class InvalidRun(RuntimeError):
    """An answer had another status than the one measured."""


def plant_body(plant_id: int) -> bytes:
    """A `NewPlant` like the ones the issue counts: `plant-123456`, tag `tree`."""
    return b'{"id":%d,"name":"plant-%d","tag":"tree"}' % (plant_id, plant_id)


def invalid_body(plant_id: int) -> bytes:
    """A body the schema refuses (400): `id` is a string."""
    return b'{"id":"%d","name":"plant-%d"}' % (plant_id, plant_id)


class Replayer:
    """`POST /plants` environs: one template, copied per request with its own body.

    A body is a stream that can be read once, so every request gets a fresh one.
    """

    def __init__(self, headers: dict[str, str]) -> None:
        self._template = falcon.testing.create_environ(
            path="/plants", method="POST", headers=headers
        )

    def environ(self, body: bytes) -> dict:
        environ = self._template.copy()
        environ["wsgi.input"] = io.BytesIO(body)
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
            raise InvalidRun(f"{environ['PATH_INFO']} answered {status}, not {expected}")


def create(app: Callable, first_id: int, count: int) -> None:
    """Create `count` plants through the app's own request path, as clients would."""
    replayer = Replayer(AUTHORIZED)
    replay(app, (replayer.environ(plant_body(i)) for i in range(first_id, first_id + count)), 200)
