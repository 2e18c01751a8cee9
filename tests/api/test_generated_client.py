"""A client generated from the document the real service serves, by openapi-python-client, does
what a user of it would: create a plant, change it only as read (`If-Match`), and recover from
the 412 of a change another client made first."""

import importlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from plantstore.testing.gunicorn_server import GunicornServer, server_environ

pytestmark = pytest.mark.slow

TOKEN = "generated-client-token"
PACKAGE = "plant_store_client"


@pytest.fixture(scope="module")
def server():
    running = GunicornServer(server_environ(PLANTSTORE_TOKENS=TOKEN))
    yield running
    _, stderr = running.stop()
    assert "Traceback" not in stderr


@pytest.fixture(scope="module")
def generated(server, tmp_path_factory):
    """The generated package, imported; a warning of the generator's (an operation or a schema
    it could not use) fails the test."""
    directory = tmp_path_factory.mktemp("generated")
    done = subprocess.run(
        [
            *(sys.executable, "-m", "openapi_python_client", "generate"),
            *("--url", f"http://127.0.0.1:{server.port}/openapi.json"),
            *("--meta", "none", "--output-path", str(directory / PACKAGE), "--fail-on-warning"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        # Its post-hooks run `ruff`, installed beside this Python, whether or not the virtual
        # environment is on PATH (CI calls `.venv/bin/pytest` without activating it).
        env={
            **os.environ,
            "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        },
    )
    assert done.returncode == 0, done.stdout + done.stderr
    with pytest.MonkeyPatch.context() as patch:
        patch.syspath_prepend(str(directory))
        yield importlib.import_module(PACKAGE)


@pytest.fixture
def client(generated, server):
    """A client of the generated package's, with the token; an undocumented status raises."""
    with generated.AuthenticatedClient(
        base_url=f"http://127.0.0.1:{server.port}", token=TOKEN, raise_on_unexpected_status=True
    ) as opened:
        yield opened


def generated_module(name: str):
    """A module of the generated package (imported once `generated` has put it on the path)."""
    return importlib.import_module(f"{PACKAGE}.{name}")


def test_a_plant_is_changed_as_read_and_a_stale_etag_is_a_412_error(client):
    models = generated_module("models")
    add_plant, get_plant, update_plant = (
        generated_module(f"api.default.{name}")
        for name in ("add_plant", "get_plant", "update_plant")
    )
    created = add_plant.sync_detailed(
        client=client, body=models.NewPlant(id=41, name="fern", tag="green")
    )
    assert (created.status_code, created.parsed) == (200, models.Plant(name="fern", tag="green"))

    changed = update_plant.sync_detailed(
        41,
        client=client,
        body=models.Plant(name="fern", tag="shade"),
        if_match=created.headers["ETag"],
    )
    assert (changed.status_code, changed.parsed) == (200, models.Plant(name="fern", tag="shade"))
    assert changed.headers["ETag"] != created.headers["ETag"]
    read = get_plant.sync_detailed(41, client=client)
    assert (read.parsed, read.headers["ETag"]) == (changed.parsed, changed.headers["ETag"])

    stale = update_plant.sync_detailed(
        41,
        client=client,
        body=models.Plant(name="fern", tag="sun"),
        if_match=created.headers["ETag"],
    )
    assert stale.status_code == 412
    assert isinstance(stale.parsed, models.Error)
    assert stale.parsed.error == 412
    assert get_plant.sync(41, client=client) == changed.parsed


def test_a_change_refused_412_is_made_again_on_the_plant_as_another_client_left_it(client):
    """`If-None-Match: *` creates; then two clients read the plant and change it, the first
    its tag, the second its name: the second meets 412, reads again and keeps the new tag."""
    models = generated_module("models")
    get_plant, update_plant = (
        generated_module(f"api.default.{name}") for name in ("get_plant", "update_plant")
    )
    created = update_plant.sync_detailed(
        42, client=client, body=models.Plant(name="ivy"), if_none_match="*"
    )
    assert (created.status_code, created.headers["Location"]) == (201, "/plants/42")
    taken = update_plant.sync_detailed(
        42, client=client, body=models.Plant(name="moss"), if_none_match="*"
    )
    assert (taken.status_code, taken.parsed.error) == (412, 412)

    mine = get_plant.sync_detailed(42, client=client)
    theirs = get_plant.sync_detailed(42, client=client)
    retagged = update_plant.sync_detailed(
        42,
        client=client,
        body=models.Plant(name=theirs.parsed.name, tag="climbing"),
        if_match=theirs.headers["ETag"],
    )
    assert retagged.status_code == 200
    renamed = update_plant.sync_detailed(
        42,
        client=client,
        body=models.Plant(name="english ivy", tag=mine.parsed.tag),
        if_match=mine.headers["ETag"],
    )
    assert (renamed.status_code, renamed.parsed.error) == (412, 412)

    mine = get_plant.sync_detailed(42, client=client)
    renamed = update_plant.sync_detailed(
        42,
        client=client,
        body=models.Plant(name="english ivy", tag=mine.parsed.tag),
        if_match=mine.headers["ETag"],
    )
    assert (renamed.status_code, renamed.parsed) == (
        200,
        models.Plant(name="english ivy", tag="climbing"),
    )
