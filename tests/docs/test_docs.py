"""The README and docs/*.md tell the truth: CI runs the README's test command, it names every
setting, the examples paste as they are, and so do docs/*.md's commands."""

import configparser
import re
import shlex
import subprocess
from typing import NamedTuple

import pytest

from plantstore.serving import legacy
from plantstore.testing.gunicorn_server import (
    PLANTSTORE,
    ROOT,
    GunicornServer,
    run_to_exit,
    server_environ,
)
from tests.support.configuration_table import documented_variables

README = (ROOT / "README.md").read_text()
#: The pages whose examples run, in the order a reader meets them: the README's Quick start,
#: then docs/interface.md's, which continue it.
EXAMPLE_PAGES = (README, (ROOT / "docs/interface.md").read_text())
#: Every page of the project's documentation.
PAGES = (ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), ROOT / "bench/README.md")


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
    """1.2's `GUNICORN_*` variables aside, which the upgrade notes name, each of them. The
    test support's own (plantstore/testing) are the tests', which docs/development.md names."""
    service = [path for path in (ROOT / "plantstore").rglob("*.py") if "testing" not in path.parts]
    sources = [*service, ROOT / "gunicorn.conf.py"]
    read = set()
    for source in sources:
        read |= set(
            re.findall(
                r'"((?:PLANTSTORE|GUNICORN)_[A-Z_]+|WEB_CONCURRENCY|FORWARDED_ALLOW_IPS)"',
                source.read_text(),
            )
        )
    assert read
    assert read - set(legacy.VARIABLES) <= documented_variables()
    changelog = (ROOT / "CHANGELOG.md").read_text()
    upgrade_notes = changelog.split("## [1.3.0]")[1].split("\n## ")[0]
    for name in legacy.VARIABLES:
        prefix = name.removesuffix("_LINE").removesuffix("_FIELDS").removesuffix("_FIELD_SIZE")
        assert name in upgrade_notes or f"{prefix}_*" in upgrade_notes, name


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


def test_no_page_shows_a_picture():
    """A picture of the service goes stale with the next change, and no test would notice (the
    one of `/docs` showed it before `PUT`): the pages say in words what tests check."""
    for page in PAGES:
        assert not re.findall(r"!\[[^]]*\]\(([^)]+)\)", page.read_text()), page
    assert {path.suffix for path in (ROOT / "docs").iterdir()} == {".md"}


#: What a command of docs/*.md may need that CI lacks, named by a comment right above its block
#: (`<!-- needs: a quiet machine for 40 minutes -->`); such a command is not run. The comment
#: does not show: the page says it in words too. Each reason is one a page gives.
NEEDS = frozenset({"a quiet machine for 40 minutes"})


class Does(NamedTuple):
    """What a command of docs/*.md does, as its page says.

    Its commands before `serve` exit 0 and print `prints`; `serve` boots `workers` workers, if
    given, and answers 200 to `GET path` sent with `headers`, with `answers` among its headers.
    """

    prints: str = ""
    workers: int | None = None
    path: str = "/healthz"
    headers: dict[str, str] | None = None
    answers: dict[str, str] | None = None


#: Every command of docs/*.md that needs nothing CI lacks, as its page writes it, and what it does.
DOCS_COMMANDS = {
    "PLANTSTORE_STORE=sqlite:///plants.db .venv/bin/plantstore check && "
    "PLANTSTORE_STORE=sqlite:///plants.db .venv/bin/plantstore serve": Does(
        prints="plantstore: ok: the sqlite store is ready", path="/readyz"
    ),
    "PLANTSTORE_STORE=sqlite:///plants.db .venv/bin/plantstore serve --bind 0.0.0.0:9000 "
    "--workers 4": Does(workers=4, path="/readyz"),
    "PLANTSTORE_STORE=sqlite:///plants.db PLANTSTORE_WEBHOOK_URLS=https://shop.example/hooks "
    "PLANTSTORE_WEBHOOK_SECRET=whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw "
    ".venv/bin/plantstore serve": Does(path="/readyz"),
    "PLANTSTORE_CORS_ORIGINS=https://shop.example,http://localhost:5173 "
    ".venv/bin/plantstore serve": Does(
        headers={"Origin": "http://localhost:5173"},
        answers={"access-control-allow-origin": "http://localhost:5173"},
    ),
}


def docs_commands() -> list[tuple[str, str]]:
    """Each line of the ```sh blocks of docs/*.md, with what the comment above its block says it
    needs (`""`: nothing)."""
    found = []
    for page in sorted((ROOT / "docs").glob("*.md")):
        blocks = re.findall(
            r"^(?:<!-- needs: (.+) -->\n)?```sh\n(.*?)^```",
            page.read_text(),
            flags=re.MULTILINE | re.DOTALL,
        )
        found += [(line, needs) for needs, block in blocks for line in block.splitlines()]
    return found


def test_every_command_of_the_docs_is_run_or_needs_what_ci_lacks():
    commands = docs_commands()
    assert {needs for _, needs in commands if needs} == NEEDS
    assert sorted(line for line, needs in commands if not needs) == sorted(DOCS_COMMANDS)


def pasted(command: str) -> tuple[dict[str, str], list[str]]:
    """The environment a command of the docs sets, and the arguments it gives `plantstore`."""
    words = shlex.split(command)
    environ = {}
    while "=" in words[0]:
        name, _, value = words.pop(0).partition("=")
        environ[name] = value
    program, *arguments = words
    assert program == ".venv/bin/plantstore", command
    return environ, arguments


@pytest.mark.slow
@pytest.mark.parametrize("line", DOCS_COMMANDS)
def test_each_command_of_the_docs_does_what_its_page_says(line, tmp_path):
    """Run in a directory of its own, as pasted there, `serve` on a free port of loopback in
    place of the address it names."""
    does = DOCS_COMMANDS[line]
    *printing, serving = line.split(" && ")
    printed = ""
    for command in printing:
        environ, arguments = pasted(command)
        done = run_to_exit(*arguments, command=[PLANTSTORE], cwd=tmp_path, **environ)
        assert done.returncode == 0, done.stderr
        printed += done.stdout + done.stderr
    assert does.prints in printed

    environ, (verb, *arguments) = pasted(serving)
    assert verb == "serve"
    if "--bind" in arguments:
        at = arguments.index("--bind")
        del arguments[at : at + 2]
    server = GunicornServer(
        server_environ(**environ), *arguments, command=(PLANTSTORE, "serve"), cwd=tmp_path
    )
    try:
        if does.workers:
            server.wait_for_stderr(rf"(?s)(Booting worker.*){{{does.workers}}}")
        status, headers, _ = server.request("GET", does.path, headers=does.headers)
    finally:
        _, errors = server.stop()
    assert status == 200
    answered = {name.lower(): value for name, value in headers.items()}
    assert answered.items() >= (does.answers or {}).items()
    assert "Traceback" not in errors


def test_the_readme_stays_under_12_kb():
    """Reference detail lives in docs/: the README is what a user reads first."""
    assert len(README.encode()) < 12_000


def test_the_package_ships_the_mit_licence_its_metadata_declares():
    """The interface declares MIT; setup.cfg says so and names LICENSE (setuptools' key
    `license_files`) for the package to ship. Read from the checkout: an installed copy's
    metadata may be older, and a build would not miss the key (setuptools' default patterns
    take a LICENSE too)."""
    setup = configparser.ConfigParser()
    setup.read(ROOT / "setup.cfg")
    metadata = setup["metadata"]
    assert (metadata["license"], metadata["license_files"]) == ("MIT", "LICENSE")
    text = (ROOT / "LICENSE").read_text()
    assert text.startswith("MIT License\n\nCopyright (c) 2026 Plant Store contributors\n")
