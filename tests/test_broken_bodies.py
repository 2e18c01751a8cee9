"""A body the client breaks while the app reads it is the client's error, never a 500.

gunicorn hands the app a stream that raises when the chunked body turns out malformed or the
client closes before its end; the worker makes it raise `TimeoutError` when the body does not
arrive in time. Here a stream raises each of them, in process; `test_hostile_clients.py` sends
the real bodies to the real server.
"""

import falcon.testing
import pytest
from gunicorn.http.errors import ChunkMissingTerminator, InvalidChunkSize, InvalidHeader, NoMoreData

from tests.conftest import TOKEN


class BrokenStream:
    """A request body that fails on the first read, as gunicorn's does."""

    def __init__(self, failure: Exception) -> None:
        self._failure = failure

    def read(self, size=-1):
        raise self._failure


@pytest.mark.parametrize(
    ("failure", "status", "message"),
    [
        (InvalidChunkSize(b"g"), 400, "The chunked body or its trailer is malformed."),
        (ChunkMissingTerminator(b"XX"), 400, "The chunked body or its trailer is malformed."),
        (InvalidHeader("a bad trailer"), 400, "The chunked body or its trailer is malformed."),
        (NoMoreData(), 400, "The connection closed before the body's end."),
        (ConnectionResetError(), 400, "The connection closed before the body's end."),
        (TimeoutError(), 408, "The body did not arrive in time."),
    ],
    ids=[
        "a bad chunk size",
        "a chunk without its CRLF",
        "a bad trailer",
        "a close",
        "a reset",
        "a stall",
    ],
)
@pytest.mark.parametrize("chunked", [True, False], ids=["chunked", "with Content-Length"])
def test_a_body_the_client_breaks_is_its_error(app, failure, status, message, chunked):
    environ = falcon.testing.create_environ(
        method="POST",
        path="/plants",
        headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"},
    )
    if chunked:
        environ.pop("CONTENT_LENGTH", None)
        environ["HTTP_TRANSFER_ENCODING"] = "chunked"
    else:
        environ["CONTENT_LENGTH"] = "25"
    environ.update({"wsgi.input": BrokenStream(failure), "wsgi.input_terminated": True})
    answer = falcon.testing.StartResponseMock()
    body = b"".join(app(environ, answer))
    assert answer.status.startswith(f"{status} ")
    assert falcon.testing.Result([body], answer.status, answer.headers).json == {
        "error": status,
        "message": message,
    }
