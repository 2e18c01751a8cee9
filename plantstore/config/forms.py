"""What a setting's value may look like: a store's URL, a bearer token, a webhook secret."""

import re

from plantstore.config.defaults import MEMORY_URL

STORE_FORMS = "memory://, sqlite:///relative/path, sqlite:////absolute/path or postgresql://..."
#: How the Standard Webhooks specification writes a secret: this prefix, then base64.
WEBHOOK_SECRET_PREFIX = "whsec_"
#: What a bearer token may be, as a regular expression (`TOKEN_RULE` in words): the service's
#: `Authorization` pattern (plantstore/api/auth.py) and the nginx site's rate key
#: (deploy/nginx.conf) take exactly these tokens, so a longer one is refused at the start
#: rather than never let in.
TOKEN_PATTERN = r"[\x21-\x7e]{1,128}"
TOKEN_RULE = "1 to 128 printable ASCII characters without spaces"


def store_kind(url: str) -> str | None:
    """Name the store a `PLANTSTORE_STORE` URL chooses (memory, sqlite, postgresql), or None."""
    if url == MEMORY_URL:
        return "memory"
    if url.startswith("sqlite:///") and url.removeprefix("sqlite:///") not in ("", "/", ":memory:"):
        return "sqlite"
    if url.startswith(("postgresql://", "postgres://")):
        return "postgresql"
    return None


def is_token(text: str) -> bool:
    """Whether `text` can be a bearer token: `TOKEN_RULE`, as `TOKEN_PATTERN` writes it."""
    return re.fullmatch(TOKEN_PATTERN, text) is not None
