"""The README tells the truth: CI runs its test command, and it names every setting."""

import re

from tests.gunicorn_server import ROOT

README = (ROOT / "README.md").read_text()


def section_commands(title: str) -> list[str]:
    """The commands of the section headed `title`, at any level, up to the next heading."""
    section = re.split(rf"^#+ {re.escape(title)}\n", README, flags=re.MULTILINE)[1]
    section = re.split(r"^#+ ", section, flags=re.MULTILINE)[0]
    return re.findall(r"```sh\n(.+)\n```", section)


def test_the_quick_start_has_two_commands_and_ci_runs_the_second_then_the_slow_tests():
    start, test = section_commands("Quick start")
    assert start.endswith(".venv/bin/plantstore serve")
    (slow,) = section_commands("Testing from the outside")
    assert slow.endswith("pytest -m slow")
    ci_commands = [line for line in (ROOT / ".ci/run").read_text().splitlines() if "pytest" in line]
    assert ci_commands == [test, slow]


def test_every_environment_variable_the_code_reads_is_in_the_readme():
    sources = [*(ROOT / "plantstore").rglob("*.py"), ROOT / "gunicorn.conf.py"]
    read = set()
    for source in sources:
        read |= set(
            re.findall(
                r'"((?:PLANTSTORE|GUNICORN)_[A-Z_]+|WEB_CONCURRENCY|FORWARDED_ALLOW_IPS)"',
                source.read_text(),
            )
        )
    assert read
    documented = set(re.findall(r"^\| `([A-Z_]+)` \|", README, flags=re.MULTILINE))
    assert read <= documented
