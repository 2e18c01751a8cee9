"""Bearer-token authentication (RFC 6750) for every resource that does not opt out."""

import falcon

from plantstore.api.tokens import Tokens

REALM = "plantstore"


class BearerAuth:
    """Let a request reach its resource only with `Authorization: Bearer <accepted token>`.

    It runs in `process_resource`, before any responder reads the body, and only where a route
    matched; a resource opts out with a class attribute `auth_required = False`. `OPTIONS`
    needs no token: it tells only which methods a path has, and a browser's CORS preflight
    never carries credentials. Tokens are never put into an error message or a log line.
    """

    def __init__(self, tokens: Tokens) -> None:
        self._tokens = tokens

    def process_resource(self, req, resp, resource, params):
        if req.method == "OPTIONS" or not getattr(resource, "auth_required", True):
            return
        if req.auth is None:
            raise _unauthorized("Send the header 'Authorization: Bearer <token>'.")
        scheme, _, token = req.auth.strip().partition(" ")
        if scheme.lower() != "bearer":
            raise _unauthorized("The Authorization header must read 'Bearer <token>'.")
        if not self._tokens.accepts(token.strip().encode()):
            raise _unauthorized("The bearer token is not accepted.", error="invalid_token")


def _unauthorized(description: str, error: str | None = None) -> falcon.HTTPUnauthorized:
    """A 401 with its `WWW-Authenticate` challenge; the app's error serializer writes the body."""
    challenge = f'Bearer realm="{REALM}"'
    if error:
        challenge += f', error="{error}"'
    return falcon.HTTPUnauthorized(
        title="Unauthorized", description=description, challenges=[challenge]
    )
