"""A plant's validator and the conditions a request puts on it (RFC 9110 §8.8.3, §13).

The `ETag` is a digest of the plant's stored bytes, the very body a read answers: it changes
whenever they do and only then, and is the same on every worker, host and store that keeps
those bytes, with nothing more to store. The conditions are checked by the store, in the same
atomic step as the change they guard (`plantstore.stores.Condition`).
"""

import hashlib

import falcon

from plantstore.stores import Condition


def etag_of(plant: bytes) -> str:
    """The plant's strong entity tag, unquoted (Falcon quotes `resp.etag`)."""
    return hashlib.blake2b(plant, digest_size=16).hexdigest()


def change_condition(req: falcon.Request) -> Condition | None:
    """What `If-Match` and `If-None-Match` ask of the plant a `PUT` or `DELETE` changes, as one
    condition, or None when they ask nothing."""
    if req.if_match is None and req.if_none_match is None:
        return None
    return lambda kept: matches(req, kept) and not none_matches(req, kept)


def matches(req: falcon.Request, kept: bytes | None) -> bool:
    """Whether `If-Match` holds: there is none, or it names the plant (`*`: any plant) by
    strong comparison, so a weak tag never matches (§13.1.1)."""
    tags = req.if_match
    if tags is None:
        return True
    if kept is None:
        return False
    if tags == ["*"]:
        return True
    current = falcon.ETag(etag_of(kept))
    return any(tag != "*" and current.strong_compare(tag) for tag in tags)


def none_matches(req: falcon.Request, kept: bytes | None) -> bool:
    """Whether `If-None-Match` names the plant (`*`: any plant), by weak comparison: the
    request's condition is then false (§13.1.2)."""
    tags = req.if_none_match
    if tags is None or kept is None:
        return False
    return tags == ["*"] or etag_of(kept) in tags


def precondition_failed(plant_id: int) -> falcon.HTTPPreconditionFailed:
    return falcon.HTTPPreconditionFailed(
        title="Precondition Failed",
        description=f"Plant {plant_id} is not as If-Match or If-None-Match requires; "
        "nothing was changed.",
    )
