"""The shipped nginx site's text, read directive by directive, for tests that hold it to the
service it fronts."""

import json
import re

from tests.support.nginx_proxy import SITE


def block(opening: str) -> str:
    """The text of the site's block that opens with `opening {`, up to the brace that closes it:
    the first at its indentation."""
    site = SITE.read_text()
    start = site.index(f"{opening} {{\n")
    closing = "\n" + opening[: len(opening) - len(opening.lstrip())] + "}\n"
    return site[start : site.index(closing, start)]


def setting(name: str, text: str | None = None) -> str:
    """The value of the one `name` directive in `text` (the whole site by default)."""
    (value,) = re.findall(rf"^\s*{name} ([^;]+);", text or SITE.read_text(), flags=re.MULTILINE)
    return value


def error_pages() -> dict[int, tuple[str, str]]:
    """Each status nginx answers itself: the page's `=status` (`""` for none, `=` for the
    page's own), and its URI."""
    pages = {}
    for codes, answered, uri in re.findall(
        r"^\s*error_page ((?:\d{3} )+)(?:(=\d{0,3}) )?(\S+);", SITE.read_text(), flags=re.MULTILINE
    ):
        for code in map(int, codes.split()):
            assert code not in pages, f"two pages for {code}"
            pages[code] = (answered, uri)
    return pages


def page(uri: str) -> tuple[int, dict, str]:
    """What the page's location answers: its status, its JSON body, and the whole location."""
    location = block(f"    location = {uri}")
    status, body = re.search(r"^\s*return (\d{3}) '([^']*)';", location, re.MULTILINE).groups()
    return int(status), json.loads(body), location
