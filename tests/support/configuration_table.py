"""The variables docs/configuration.md's table documents, one row each: the tests that hold the
code to that table read it here."""

import re

from plantstore.testing.gunicorn_server import ROOT


def documented_variables() -> set[str]:
    """The variables of docs/configuration.md's table."""
    configuration = (ROOT / "docs/configuration.md").read_text()
    return set(re.findall(r"^\| `([A-Z_]+)` \|", configuration, flags=re.MULTILINE))
