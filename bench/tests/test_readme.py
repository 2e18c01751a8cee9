"""bench/README.md tells the truth about the bench: every part and option it names is the
bench's, each command it shows parses, and each name of the code it cites exists.

These check the bench's own page against the bench, so they stand beside it: tests/ imports
no bench module (tests/docs/test_docs.py reads this page too, for what every page must do).
"""

import pkgutil
import re
import shlex

from bench.__main__ import PARTS, make_parser
from bench.server import ROOT

BENCH_README = (ROOT / "bench" / "README.md").read_text()
#: The names of other programs that bench/README.md cites, spelled as they spell them. A name of
#: the bench's or the package's is cited with its module (`bench.load.python_load`), and checked.
OTHER_PROGRAMS_NAMES = frozenset(
    {"data_segs_out", "pg_stat_database", "synchronous_commit", "xact_commit"}
)


def cited(page: str) -> list[str]:
    """What a page cites as code, in backticks outside its code blocks, spaces made single."""
    prose = re.sub(r"^```.*?^```", "", page, flags=re.MULTILINE | re.DOTALL)
    return [" ".join(span.split()) for span in re.findall(r"`([^`]+)`", prose)]


def source_text(*folders: str) -> str:
    """The Python source of the checkout's `folders`, as one text to look names up in."""
    return "".join(path.read_text() for f in folders for path in (ROOT / f).rglob("*.py"))


def test_the_bench_readme_stays_under_15_kb():
    """A reference, with the figures of one run: history belongs in commit messages."""
    assert len(BENCH_README.encode()) < 15_000


def test_every_name_of_the_code_the_bench_readme_cites_exists():
    """Files, modules and what they define (`bench.floor:app` as gunicorn names an app), the
    service's variables and metrics; a bare snake_case or CamelCase name is another program's."""
    code = source_text("plantstore", "bench")
    service = source_text("plantstore")
    spans = cited(BENCH_README)
    words = {word for span in spans for word in span.split()}
    paths = [w for w in words if re.fullmatch(r"(bench|plantstore|tests|docs|deploy)/\S+", w)]
    paths += [w for w in words if re.fullmatch(r"[\w-]+(\.[\w-]+)*\.(py|lua|toml|cfg)", w)]
    assert "bench/counts.py" in paths
    assert [path for path in paths if not (ROOT / path).exists()] == []
    objects = [w for w in words if re.fullmatch(r"(bench|plantstore|tests)(\.\w+)+(:\w+)?", w)]
    assert "bench.loopback.tokens_file" in objects
    for name in objects:
        pkgutil.resolve_name(name)
    variables = [w for w in words if re.fullmatch(r"(PLANTSTORE|BENCH)_[A-Z_]+", w)]
    assert [name for name in variables if f'"{name}"' not in code] == []
    metrics = [w for w in words if re.fullmatch(r"plantstore_[a-z_]+", w)]
    assert metrics
    assert [m for m in metrics if f'"{m.removesuffix("_total")}"' not in service] == []
    bare = [
        s for s in spans if re.fullmatch(r"[a-z]+(_[a-z0-9]+)+(\(\))?|[A-Z][a-z0-9]+[A-Z]\w*", s)
    ]
    assert set(bare) - set(metrics) <= OTHER_PROGRAMS_NAMES


def test_the_bench_readmes_parts_options_and_commands_are_the_benchs():
    """Its table has every part and no other; each option it cites is one, and each command of
    its code blocks and each option it shows with values parse as the bench parses them."""
    parser = make_parser()
    options = set(re.findall(r"--[a-z][a-z-]*", parser.format_help()))
    assert re.findall(r"^\| `([\w-]+)` \|", BENCH_README, flags=re.MULTILINE) == list(PARTS)
    shown = [shlex.split(span) for span in cited(BENCH_README) if span.startswith("--")]
    assert shown
    assert [words[0] for words in shown if words[0] not in options] == []
    blocks = "".join(re.findall(r"^```sh\n(.*?)^```", BENCH_README, flags=re.M | re.S))
    commands = re.findall(r"-m bench(?= |$)(.*)$", blocks, flags=re.MULTILINE)
    assert len(commands) >= 2
    for arguments in [*(words for words in shown if len(words) > 1), *map(shlex.split, commands)]:
        parser.parse_args(arguments)
