"""A body whose reading fails half-way is the client's error, never a 500.

PEP 3333 names no exception for a `wsgi.input` that fails, so each server raises its own:
gunicorn one of its parse errors for a broken chunk, another when the client closes before the
end, an `OSError` when it resets. Here a stream raises exceptions of classes the app cannot
know, in process; `test_gunicorn.py` sends broken bodies to bare gunicorn, and
`test_hostile_clients.py` to nginx in front of it.
"""

import falcon.testing
import pytest

from tests.conftest import TOKEN


class ServersOwnError(Exception):
    """An exception of a class only the server knows, as gunicorn's are to the app."""


class BrokenStream:
    """A request body that fails on the first read."""

    def __init__(self, failure: Exception) -> None:
        self._failure = failure

    def read(self, size=-1):
        raise self._failure


@pytest.mark.parametrize(
    "failure",
    [ServersOwnError("invalid chunk size"), ValueError("a bad trailer"), ConnectionResetError()],
    ids=["a server's own exception", "a ValueError", "a reset"],
)
@pytest.mark.parametrize("chunked", [True, False], ids=["chunked", "with Content-Length"])
def test_a_body_whose_reading_fails_is_the_clients_400(app, failure, chunked):
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
    assert answer.status.startswith("400 ")
    assert answer.headers_dict["content-type"] == "application/json"
    assert falcon.testing.Result([body], answer.status, answer.headers).json == {
        "error": 400,
        "message": "The body is malformed, or the connection closed before its end.",
    }
