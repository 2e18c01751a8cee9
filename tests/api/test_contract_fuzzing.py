"""schemathesis fuzzes the service as deployed, nginx in front of the real gunicorn, from the
service's own `/openapi.json`. (Run directly, gunicorn answers what it cannot parse, a request
line over its limit say, with its own HTML pages, which the document does not promise.)

With a token it runs every phase: the document's examples, each operation on its own, then
stateful sequences that follow the document's links from a created plant to its `GET`, `PUT` and
`DELETE`, and from a read plant to its `PUT`, carrying the plant's `ETag` as `If-Match`.
"""

import collections
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.nginx_proxy import Deployment

pytestmark = pytest.mark.slow

TOKEN = "fuzzing-token"
#: schemathesis' settings beside its command line: which statuses answer valid data; and its
#: hooks, which keep it from waiting for events.
CONFIG = Path(__file__).with_name("schemathesis.toml")
HOOKS = Path(__file__).with_name("schemathesis_hooks.py")
#: The document's links, as schemathesis names them.
ADD_TO_GET = "POST /plants -> [200] getPlant -> GET /plants/{id}"
ADD_TO_UPDATE = "POST /plants -> [200] updatePlant -> PUT /plants/{id}"
ADD_TO_DELETE = "POST /plants -> [200] deletePlant -> DELETE /plants/{id}"
READ_TO_UPDATE = "GET /plants/{id} -> [200] updatePlant -> PUT /plants/{id}"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    running = Deployment(tmp_path_factory.mktemp("deployment"), PLANTSTORE_TOKENS=TOKEN)
    yield running
    nginx_log, _, stderr = running.stop()
    assert not re.search(r"\[(emerg|alert|crit)\]", nginx_log), nginx_log
    assert "Traceback" not in stderr
    assert "[ERROR]" not in stderr


def schemathesis(server, reports, max_time, *args):
    """Run schemathesis with every check it has; give back its report, exchanges and output.

    Its events, which tell which link each stateful step followed, go to `events.ndjson`.
    """
    command = [
        *(sys.executable, "-m", "schemathesis.cli", "--config-file", str(CONFIG), "run"),
        f"http://127.0.0.1:{server.port}/openapi.json",
        *("--url", f"http://127.0.0.1:{server.port}"),
        *("--checks", "all", "--max-time", str(max_time), "--request-timeout", "10"),
        *("--seed", "4", "--generation-database", "none", "--no-color"),
        *("--report", "json,har,ndjson"),
        *("--report-json-path", str(reports / "report.json")),
        *("--report-har-path", str(reports / "exchanges.har")),
        *("--report-ndjson-path", str(reports / "events.ndjson")),
        *args,
    ]
    # Run in the reports' directory, where schemathesis also leaves its cache of crashes.
    run = subprocess.run(
        command,
        cwd=reports,
        env={**os.environ, "SCHEMATHESIS_HOOKS": str(HOOKS)},
        capture_output=True,
        text=True,
        timeout=max_time + 120,
    )
    report = json.loads((reports / "report.json").read_text())
    exchanges = json.loads((reports / "exchanges.har").read_text())["log"]["entries"]
    assert run.returncode == 0, run.stdout[-3000:]
    return report, exchanges, run.stdout


def tally(exchanges):
    """How often each (method, path, status) was seen."""
    return collections.Counter(
        (e["request"]["method"], e["request"]["url"].split("/", 3)[3], e["response"]["status"])
        for e in exchanges
    )


#: A stateful step that followed a link of the document: the link, whether the step sent the
#: `If-Match` the link carried, and the answer's status.
Step = collections.namedtuple("Step", "link carried status")


def linked_steps(reports: Path) -> list[Step]:
    """The stateful steps of a run that followed a link of the document, not one schemathesis
    inferred.

    To explore, schemathesis leaves out some of the values a link carries: only a step that
    sent the `If-Match` its link carried shows the link's `ETag` at work.
    """
    steps = []
    with (reports / "events.ndjson").open() as events:
        for line in events:
            event = json.loads(line)
            if "ScenarioFinished" not in event:
                continue
            scenario = event["ScenarioFinished"]["recorder"]
            for case_id, case in scenario.get("cases", {}).items():
                link = case.get("transition")
                exchange = scenario.get("interactions", {}).get(case_id)
                if link is None or link["is_inferred"] or exchange is None:
                    continue
                carried = link["parameters"].get("headers", {}).get("If-Match", {}).get("value")
                sent = exchange["request"]["headers"].get("If-Match")
                steps.append(
                    Step(
                        link["id"],
                        carried is not None and sent == [carried],
                        exchange["response"]["status_code"],
                    )
                )
    return steps


def test_fuzzing_with_a_valid_token_finds_nothing(server, tmp_path, note_figure):
    report, exchanges, output = schemathesis(
        server, tmp_path, 120, "-H", f"Authorization: Bearer {TOKEN}"
    )
    cases = report["test_cases"]
    links = re.search(r"API Links: +(\d+) covered / (\d+) selected / (\d+) total", output)
    note_figure(
        f"schemathesis with a token: {cases['generated']} cases, {cases['with_failures']} with "
        f"failures, {len(report['errors'])} errors, {len(exchanges)} requests, "
        f"links {links[0] if links else 'not followed'}"
    )
    assert report["complete"]
    operations = report["operations"]
    assert operations["tested"] == operations["selected"] == operations["total"] >= 11
    assert {phase: report["phases"][phase]["status"] for phase in report["phases"]} == {
        "examples": "success",
        "coverage": "success",
        "fuzzing": "success",
        "stateful": "success",
    }
    # A plant's read is reached by a link only: its own link is in the next test.
    followed = {step.link for step in linked_steps(tmp_path)}
    assert {ADD_TO_GET, ADD_TO_UPDATE, ADD_TO_DELETE} <= followed, followed
    assert (cases["with_failures"], report["failures"], report["errors"]) == (0, [], [])
    assert cases["generated"] >= 1000
    assert report["warnings"]["missing_auth"] == []
    seen = tally(exchanges)
    for answer in [
        *[("POST", 200), ("POST", 400), ("GET", 200), ("GET", 304), ("GET", 404)],
        *[("PUT", 200), ("PUT", 201), ("PUT", 412), ("DELETE", 204)],
    ]:
        assert any(
            (method, status) == answer and path.startswith("plants")
            for method, path, status in seen
        ), answer


def test_stateful_sequences_change_a_plant_with_the_etag_its_link_carried(
    server, tmp_path, note_figure
):
    """The links from a create and from a read to the plant's `PUT` carry its `ETag` as
    `If-Match`, and the `PUT` takes it (200) unless the sequence changed the plant since (412).

    Only valid requests, and only the plants' operations: the time goes to sequences, which
    must reach a read before they can follow its link.
    """
    _, _, output = schemathesis(
        server,
        tmp_path,
        40,
        *("-H", f"Authorization: Bearer {TOKEN}"),
        *("--phases", "stateful", "--mode", "positive", "--include-path-regex", "^/plants"),
    )
    steps = linked_steps(tmp_path)
    answered = {
        link: collections.Counter(s.status for s in steps if s.link == link and s.carried)
        for link in (ADD_TO_UPDATE, READ_TO_UPDATE)
    }
    links = re.search(r"API Links: +(.*)", output)
    note_figure(
        f"schemathesis' sequences: links {links[1] if links else 'not followed'}; "
        + "; ".join(f"{link}: {dict(statuses)}" for link, statuses in answered.items())
    )
    # schemathesis may leave a link's ETag out, or send the PUT to another id than the one read
    # (412, rightly): what carried an ETag answers 200 or 412, and one at least was taken.
    for link, statuses in answered.items():
        assert set(statuses) <= {200, 412}, (link, statuses)
    assert sum(statuses[200] for statuses in answered.values()) > 0, answered


def test_fuzzing_without_a_valid_token_meets_only_401(server, tmp_path, note_figure):
    report, exchanges, _ = schemathesis(server, tmp_path, 20, "--output-sanitize", "false")
    cases = report["test_cases"]
    plants = [e for e in exchanges if "/plants" in e["request"]["url"]]
    tokens = collections.Counter(
        any(h["name"].lower() == "authorization" for h in e["request"]["headers"]) for e in plants
    )
    note_figure(
        f"schemathesis without a valid token: {cases['generated']} cases, "
        f"{cases['with_failures']} with failures, {len(plants)} requests to /plants "
        f"({tokens[False]} without a token, {tokens[True]} with a wrong one), "
        f"statuses {sorted({e['response']['status'] for e in plants})}"
    )
    assert (cases["with_failures"], report["failures"], report["errors"]) == (0, [], [])
    assert tokens[False] > 0 and tokens[True] > 0
    for exchange in plants:
        response = exchange["response"]
        headers = {h["name"].lower(): h["value"] for h in response["headers"]}
        if exchange["request"]["method"] == "OPTIONS":
            # It needs no token and tells only the path's methods (docs/interface.md, Paths).
            assert response["status"] == 204 and not response["content"].get("text")
            assert "allow" in headers and "content-type" not in headers
            continue
        assert response["status"] == 401
        assert headers["www-authenticate"].startswith('Bearer realm="plantstore"')
        if exchange["request"]["method"] != "HEAD":
            assert json.loads(response["content"]["text"])["error"] == 401
