"""Bearer-token authentication (RFC 6750) for every resource that does not opt out."""

import hmac
from collections.abc import Iterable

import falcon

from plantstore.api.errors import error_body

REALM = "plantstore"


def _refusal(description: str, error: str | None = None) -> tuple[str, bytes]:
    """A 401 answer, made once: its `WWW-Authenticate` challenge and its `Error` body."""
    challenge = f'Bearer realm="{REALM}"'
    if error:
        challenge += f', error="{error}"'
    return challenge, error_body(401, description)


_NO_CREDENTIALS = _refusal("Send the header 'Authorization: Bearer <token>'.")
_NOT_BEARER = _refusal("The Authorization header must read 'Bearer <token>'.")
_NOT_ACCEPTED = _refusal("The bearer token is not accepted.", error="invalid_token")


class BearerAuth:
    """Let a request reach its resource only with `Authorization: Bearer <accepted token>`.

    It runs in `process_resource`, before any responder reads the body, and only where a route
    matched; a resource opts out with a class attribute `auth_required = False`. `OPTIONS`
    needs no token: it tells only which methods a path has, and a browser's CORS preflight
    never carries credentials. Tokens are never put into an error message or a log line.
    """

    def __init__(self, tokens: Iterable[str]) -> None:
        self._tokens = tuple(token.encode() for token in tokens)

    def process_resource(self, req, resp, resource, params):
        if req.method != "OPTIONS" and getattr(resource, "auth_required", True):
            refusal = self._refusal(req.auth)
            if refusal:
                _refuse(resp, refusal)

    def _refusal(self, credentials: str | None) -> tuple[str, bytes] | None:
        """Tell why these credentials are refused; None when they are accepted."""
        if credentials is None:
            return _NO_CREDENTIALS
        scheme, _, token = credentials.strip().partition(" ")
        if scheme.lower() != "bearer":
            return _NOT_BEARER
        if not self._accepts(token.strip().encode()):
            return _NOT_ACCEPTED
        return None

    def _accepts(self, candidate: bytes) -> bool:
        """Compare with every token, each in constant time, so timing tells nothing."""
        accepted = False
        for token in self._tokens:
            accepted |= hmac.compare_digest(token, candidate)
        return accepted


def _refuse(resp, refusal: tuple[str, bytes]) -> None:
    """Answer 401 and skip the resource.

    The refusals are constants, so they are written here rather than raised: raising one through
    Falcon's error handling cost half of the time of a whole 401 answer.
    """
    challenge, body = refusal
    resp.status = falcon.HTTP_401
    resp.set_header("WWW-Authenticate", challenge)
    resp.content_type = falcon.MEDIA_JSON
    resp.data = body
    resp.complete = True
