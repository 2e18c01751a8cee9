"""A plant's validator and the conditions a request puts on it (RFC 9110 §8.8.3, §13).

The `ETag` is a digest of the plant's stored bytes, the very body a read answers: it changes
whenever they do and only then, and is the same on every worker, host and store that keeps
those bytes, with nothing more to store. The conditions are checked by the store, in the same
atomic step as the change they guard (`plantstore.stores.Condition`).

`If-Match` and `If-None-Match` are read here, by the RFC's grammar, rather than through
Falcon's `req.if_match`, which takes a list it cannot read for no header at all: a change
whose condition a typo switched off would overwrite or delete what its client meant to
protect. A field that is not `*` or a list of entity-tags is a 400 naming it.
"""

import hashlib
import re
from typing import Literal, NamedTuple

import falcon

from plantstore.core.plants import Condition

#: An entity-tag (§8.8.3): `W/` when weak, then the opaque tag, quoted, of `etagc` characters
#: (a header's bytes come as Latin-1, so obs-text is U+0080 to U+00FF).
_ENTITY_TAG = r'(W/)?"([\x21\x23-\x7e\x80-\xff]*)"'
#: What both fields may hold (§13.1.1, §13.1.2): `*` alone, or a list of entity-tags (§5.6.1.2)
#: whose elements may be empty, with optional whitespace around the commas; a comma inside
#: quotes belongs to its tag. Written for Python and for the OpenAPI document's `pattern` alike.
#:
#: Each character has one way to match, so a backtracking engine (Python's `re`, a client's
#: ECMA-262 one) reads any value in time linear in its length. Whitespace belongs to what comes
#: before it: the field's start, the `*`, a tag or a comma; each comma starts an element. The
#: RFC's `OWS "," OWS` between optional elements would give whitespace between two commas to
#: either: exponential time on a value that almost matches, with the GIL held throughout.
ENTITY_TAGS_PATTERN = (
    rf"^[ \t]*(?:\*[ \t]*|(?:{_ENTITY_TAG}[ \t]*)?(?:,[ \t]*(?:{_ENTITY_TAG}[ \t]*)?)*)$"
)
_ENTITY_TAGS = re.compile(ENTITY_TAGS_PATTERN)
_ENTITY_TAG_IN_LIST = re.compile(_ENTITY_TAG)

#: A field's value: `*` (any plant), only ever as the whole value, or the tags it lists.
EntityTags = Literal["*"] | tuple[falcon.ETag, ...]


def etag_of(plant: bytes) -> str:
    """The plant's strong entity tag, unquoted (Falcon quotes `resp.etag`)."""
    return hashlib.blake2b(plant, digest_size=16).hexdigest()


def entity_tags(header: str, value: str) -> EntityTags:
    """Read the value of the `If-Match` or `If-None-Match` field named `header`.

    `"*"`, quoted, is a tag like any other; an empty list (an empty value, or commas alone)
    names no tag.

    Raises:
        falcon.HTTPBadRequest: the value is neither `*` nor a list of entity-tags.
    """
    if not _ENTITY_TAGS.fullmatch(value):
        raise falcon.HTTPBadRequest(
            title="Bad Request",
            description=f"{header} must be * or a list of entity-tags separated by commas, each "
            'quoted as an ETag is ("..." or, weak, W/"...").',
        )
    if value.strip(" \t") == "*":
        return "*"
    return tuple(_tag(opaque, weak) for weak, opaque in _ENTITY_TAG_IN_LIST.findall(value))


def _tag(opaque: str, weak: str) -> falcon.ETag:
    tag = falcon.ETag(opaque)
    tag.is_weak = bool(weak)
    return tag


class Conditions(NamedTuple):
    """What a request's `If-Match` and `If-None-Match` ask of the plant it reads or changes;
    None for a field the request does not send."""

    if_match: EntityTags | None
    if_none_match: EntityTags | None

    @classmethod
    def of(cls, req: falcon.Request) -> "Conditions":
        """Read the request's conditions; a field that does not parse is a 400 naming it."""
        return cls(_field(req, "If-Match"), _field(req, "If-None-Match"))

    def matches(self, kept: bytes | None) -> bool:
        """Whether `If-Match` holds: there is none, or it names the plant (`*`: any plant) by
        strong comparison, so a weak tag never matches (§13.1.1)."""
        if self.if_match is None:
            return True
        if kept is None:
            return False
        if self.if_match == "*":
            return True
        current = falcon.ETag(etag_of(kept))
        return any(current.strong_compare(tag) for tag in self.if_match)

    def none_matches(self, kept: bytes | None) -> bool:
        """Whether `If-None-Match` names the plant (`*`: any plant), by weak comparison: the
        request's condition is then false (§13.1.2)."""
        if self.if_none_match is None or kept is None:
            return False
        return self.if_none_match == "*" or etag_of(kept) in self.if_none_match

    def of_change(self) -> Condition | None:
        """What both fields ask of the plant a `PUT` or `DELETE` changes, as one condition for
        the store, or None when they ask nothing."""
        if self.if_match is None and self.if_none_match is None:
            return None
        return lambda kept: self.matches(kept) and not self.none_matches(kept)


def _field(req: falcon.Request, header: str) -> EntityTags | None:
    value = req.get_header(header)
    return None if value is None else entity_tags(header, value)


#: What a 412 tells its client, of the plant its request names.
PRECONDITION_FAILED = (
    "Plant {plant_id} is not as If-Match or If-None-Match requires; nothing was changed."
)


def precondition_failed(plant_id: int) -> falcon.HTTPPreconditionFailed:
    return falcon.HTTPPreconditionFailed(
        title="Precondition Failed", description=PRECONDITION_FAILED.format(plant_id=plant_id)
    )
