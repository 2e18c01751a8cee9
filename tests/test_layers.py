"""The house's shape: its parts import downward only, and importing any module does nothing.

The layers are import-linter's contract in pyproject.toml, checked as `lint-imports` checks
them (imports inside functions count too); a second contract there keeps tests/ and bench/
apart, each using plantstore/testing. A module's import must change nothing global, so that a
test, a tool or gunicorn's master can import any of them in any order.
"""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from plantstore.testing.gunicorn_server import ROOT

MODULES = sorted(
    ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
    for path in (ROOT / "plantstore").rglob("*.py")
    if path.stem.isidentifier() and path.stem != "__main__"  # a script: it runs when imported
)


def test_each_part_imports_only_the_parts_below_it():
    checked = subprocess.run(
        [Path(sys.executable).parent / "lint-imports", "--no-cache"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert checked.returncode == 0, checked.stdout


def test_config_imports_nothing_of_the_package_but_itself():
    for path in (ROOT / "plantstore" / "config").rglob("*.py"):
        imported = [
            line.split()[1]
            for line in path.read_text().splitlines()
            if line.startswith(("import ", "from "))
        ]
        assert [name for name in imported if name.split(".")[0] == "plantstore"] == [
            name for name in imported if name.startswith("plantstore.config.")
        ], path


#: A module a reader can hold in mind at once: a longer one holds more than one idea.
LONGEST_MODULE = 300


def test_every_module_of_the_package_is_under_300_lines():
    lines = {
        str(path.relative_to(ROOT)): len(path.read_text().splitlines())
        for path in (ROOT / "plantstore").rglob("*.py")
    }
    assert {path: n for path, n in lines.items() if n >= LONGEST_MODULE} == {}


#: Imports one module in a fresh interpreter, whose environment holds a bad value for every
#: setting, and prints what importing it changed that a process shares.
PROBE = """
import json, os, sys, threading, tempfile
before_environ, before_threads = dict(os.environ), threading.active_count()
before_files = set(os.listdir(tempfile.gettempdir()))
import {module}
changed = {{
    "environ": dict(os.environ) != before_environ,
    "threads": threading.active_count() - before_threads,
    "files": sorted(set(os.listdir(tempfile.gettempdir())) - before_files),
}}
if "prometheus_client" in sys.modules:
    from prometheus_client import REGISTRY
    names = [family.name for family in REGISTRY.collect()]
    changed["metrics"] = [name for name in names if name.startswith("plantstore")]
print(json.dumps(changed))
"""

HOSTILE = {
    "PLANTSTORE_TOKENS": "not a token",
    "PLANTSTORE_STORE": "mysql://nowhere",
    "PLANTSTORE_MAX_BODY_BYTES": "lots",
    "PLANTSTORE_LOG_FORMAT": "xml",
    "WEB_CONCURRENCY": "many",
    "GUNICORN_THREADS": "lots",
}


# A fresh interpreter for each of the package's modules, seconds in all: the slow set.
@pytest.mark.slow
@pytest.mark.parametrize("module", MODULES)
def test_importing_a_module_alone_changes_nothing(module, tmp_path):
    """Whatever the environment holds: reading it, registering metrics, opening files and
    starting threads happen in functions that gunicorn's hooks or the command call."""
    imported = subprocess.run(
        [sys.executable, "-c", PROBE.format(module=module)],
        cwd=ROOT,
        env={"PATH": "/usr/bin:/bin", "TMPDIR": str(tmp_path), **HOSTILE},
        capture_output=True,
        text=True,
    )
    assert imported.returncode == 0, imported.stderr
    changed = json.loads(imported.stdout)
    assert changed.pop("metrics", []) == []
    assert changed == {"environ": False, "threads": 0, "files": []}
