"""The shipped nginx site's rates and logs agree with the service: one key for one token, one
size for every key's state, an address's rate for what bears no token, no credential logged."""

import re

from plantstore.api.auth import BEARER
from plantstore.api.errors import RETRY_AFTER_SECONDS
from plantstore.config import is_token
from tests.support.nginx_proxy import SITE
from tests.support.site_text import block, error_pages, page, setting

#: nginx 1.22 on 64-bit, src/core/ngx_rbtree.h and src/http/modules/ngx_http_limit_req_module.c:
#: a state is `offsetof(ngx_rbtree_node_t, color)` (key, left, right, parent: 32 bytes), then
#: `offsetof(ngx_http_limit_req_node_t, data)` (color, dummy, len, padding, queue, last,
#: excess, count: 48 bytes), then the key.
STATE_BEFORE_THE_KEY = 32 + 48
#: src/core/ngx_slab.c: a size up to half a page is served from slabs of the next power of two.
SLAB_SIZES = [2**shift for shift in range(3, 12)]


def token_map() -> tuple[str, str]:
    """The source and value of the site's one regular expression for `$token_key`."""
    (source, value) = re.findall(
        r'^\s*"(~\*[^"]*)" "([^"]*)";$', block("map $http_authorization $token_key"), re.M
    )[0]
    return source, value


def slab(size: int) -> int:
    return next(slab for slab in SLAB_SIZES if size <= slab)


def test_the_sites_token_key_is_read_with_the_services_own_expression():
    """One expression for what is a bearer credential: the map's, case-insensitive and whole
    (`~*`, `^…$`), is the service's, which it takes case-insensitively and whole (fullmatch)."""
    source, value = token_map()
    assert source == f"~*^{BEARER.pattern}$"
    assert BEARER.flags & re.IGNORECASE and BEARER.flags & re.ASCII
    # The named capture is Python's syntax (?P<name>), which PCRE reads as well.
    assert value.startswith("${bearer_token}")
    assert setting("default", block("map $http_authorization $token_key")) == '""'


def test_every_tokens_state_takes_one_slab_size_whatever_the_tokens_length():
    """So that a state freed from a full zone always makes room for another (nginx frees the
    least recently used one and tries once more); and every token the service takes has a key."""
    _, value = token_map()
    padding = len(value.removeprefix("${bearer_token}"))
    longest = max(length for length in range(1, 300) if is_token("t" * length))
    sizes = {slab(STATE_BEFORE_THE_KEY + length + padding) for length in range(1, longest + 1)}
    assert sizes == {256}
    assert BEARER.fullmatch("Bearer " + "t" * longest)
    assert not BEARER.fullmatch("Bearer " + "t" * (longest + 1))


def zones() -> dict[str, str]:
    """Each `limit_req_zone`'s name and key."""
    found = re.findall(r"^limit_req_zone (\S+) zone=(\w+):\S+ rate=\S+;$", SITE.read_text(), re.M)
    return {zone: key for key, zone in found}


def test_a_request_is_counted_by_its_token_or_without_one_by_its_address():
    assert zones() == {"tokens": "$token_key", "addresses": "$address_key"}
    by_address = block("map $token_key $address_key")
    assert re.findall(r"^\s*(\S+) (\S+);$", by_address, re.M) == [
        ('""', "$binary_remote_addr"),
        ("default", '""'),
    ]
    proxied = block("    location /")
    assert re.findall(r"^\s*limit_req (.+);$", proxied, re.M) == [
        "zone=tokens burst=200 nodelay",
        "zone=addresses burst=200 nodelay",
    ]
    assert setting("limit_req_status", proxied) == "429"
    assert setting("limit_req_log_level", proxied) == "warn"


def test_the_429_says_when_to_retry_and_speaks_of_a_token_or_an_address():
    status, body, location = page(error_pages()[429][1])
    assert status == 429
    assert "token" in body["message"] and "address" in body["message"]
    assert f"\n        add_header Retry-After {RETRY_AFTER_SECONDS} always;\n" in location


#: What nginx variables can hold a credential: the user of Basic credentials, any header, the
#: query string (RFC 6750 §2.3 lets a bearer token ride in it), the request line that holds it.
CREDENTIAL_HOLDERS = re.compile(
    r"\$(remote_user|http_\w+|args|arg_\w+|query_string|request_uri|request\b|request_body)"
)


def test_the_site_logs_no_credential_and_each_429():
    """Its own access log, whose format holds no credential (nginx's `combined`, Debian's
    default, names the user of Basic credentials); the error log at `warn`, where the 429s are
    (Debian's nginx.conf leaves it at `error`)."""
    server = block("server")
    assert setting("access_log", server).split()[1] == "plantstore"
    assert setting("error_log", server).split()[1] == "warn"
    formats = re.findall(r"^log_format (\w+) ((?:'[^']*'\s*)+);$", SITE.read_text(), re.M)
    assert [name for name, _ in formats] == ["plantstore"]
    assert not CREDENTIAL_HOLDERS.search(formats[0][1])
    assert "$request_path" in formats[0][1]
    path = block("map $request_uri $request_path")
    assert re.findall(r'^\s*"~\^\(\?P<(\w+)>\[\^\?\]\*\)" \$(\w+);$', path, re.M) == [
        ("path_only", "path_only")
    ]
