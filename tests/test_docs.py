"""The README tells the truth: CI runs its test command, it names every setting, and its
examples paste as they are."""

import re
import shlex
import subprocess

import pytest

from tests.gunicorn_server import PLANTSTORE, ROOT, GunicornServer, server_environ

README = (ROOT / "README.md").read_text()
#: The pages whose examples run, in the order a reader meets them: the README's continue the
#: Quick start's, and docs/interface.md's continue the README's.
EXAMPLE_PAGES = (README, (ROOT / "docs/interface.md").read_text())


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


def examples(page: str) -> list[tuple[str, str]]:
    """Each `$ curl ...` line of the page's console blocks, with the answer it shows."""
    found = []
    for block in re.findall(r"^```console\n(.*?)^```", page, flags=re.MULTILINE | re.DOTALL):
        found += re.findall(
            r"^\$ (curl [^\n]+)\n(.*?)(?=^\$ |\Z)", block, flags=re.MULTILINE | re.DOTALL
        )
    return [(command, answer.strip("\n")) for command, answer in found]


def head_and_body(answer: str) -> tuple[str, dict[str, str], str]:
    """An HTTP answer as `curl -i` prints it (read as text, lines end in `\\n`): the status
    line, the headers, the body."""
    head, _, body = answer.partition("\n\n")
    status, *fields = head.split("\n")
    headers = {}
    for field in fields:
        name, _, value = field.partition(":")
        headers[name.strip().lower()] = value.strip()
    return status, headers, body


@pytest.mark.slow
def test_the_readmes_examples_answer_what_they_show_pasted_as_they_are(tmp_path):
    start, _ = section_commands("Quick start")
    (token,) = re.findall(r"\bPLANTSTORE_TOKENS=(\S+) ", start)
    shown = [example for page in EXAMPLE_PAGES for example in examples(page)]
    assert len(shown) >= 8
    assert all("Authorization: Bearer let-me-in" in command for command, _ in shown[:5])

    server = GunicornServer(
        server_environ(PLANTSTORE_TOKENS=token), command=(PLANTSTORE, "serve"), cwd=tmp_path
    )
    try:
        for command, answer in shown:
            pasted = command.replace("localhost:8000", f"localhost:{server.port}")
            assert pasted != command, command
            printed = subprocess.run(
                shlex.split(pasted), capture_output=True, text=True, timeout=30, check=True
            ).stdout
            status, headers, body = head_and_body(printed)
            expected_status, expected_headers, expected_body = head_and_body(answer)
            assert (status, body) == (expected_status, expected_body), command
            for name, value in expected_headers.items():
                assert headers.get(name) == value, (command, name)
    finally:
        server.stop()


def test_the_readme_stays_under_20_kb():
    """Reference detail lives in docs/: the README is what a user reads first."""
    assert len(README.encode()) < 20_000
