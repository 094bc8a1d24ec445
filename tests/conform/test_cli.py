"""`zqbench conform` on the command line: the catalogue, usage errors, exit codes, files."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from tests.conform.fake_server import FakeServer
from zqbench.cli import app
from zqbench.conform.catalogue import CATALOGUE

runner = CliRunner()
FAST = ["--api", "all", "--slope-steps", "1,2", "--overload-concurrency", "6"]


def test_list_prints_the_catalogue() -> None:
    result = runner.invoke(app, ["conform", "--list"])
    assert result.exit_code == 0
    lines = result.output.splitlines()
    assert [line.split()[0] for line in lines] == [c.id for c in CATALOGUE]


def test_unknown_group_or_id_is_usage_error_listing_valid_ones() -> None:
    result = runner.invoke(app, ["conform", "--target", "http://127.0.0.1:9", "--only", "nope"])
    assert result.exit_code == 2
    assert "zqbench: error: --only 'nope': unknown group; valid: api," in result.output
    assert "zeroqueue" in result.output
    result = runner.invoke(app, ["conform", "--target", "http://127.0.0.1:9", "--skip", "x.1"])
    assert result.exit_code == 2
    assert "zqbench: error: --skip 'x.1': unknown check id; valid: api." in result.output
    assert "zeroqueue.10" in result.output


def test_unreachable_target_exits_3_naming_the_address() -> None:
    with FakeServer() as srv:
        port = srv.port  # a port that was just free: nothing listens once the server stops
    result = runner.invoke(app, ["conform", "--target", f"http://127.0.0.1:{port}"])
    assert result.exit_code == 3
    assert f"127.0.0.1:{port}" in result.output


def test_exit_codes_and_output_files(tmp_path: Path) -> None:
    with FakeServer() as srv:
        ok = runner.invoke(
            app,
            [
                "conform",
                "--target",
                srv.base_url,
                "--only",
                "api",
                *FAST,
                "--out",
                str(tmp_path / "ok"),
            ],
        )
    assert ok.exit_code == 0, ok.output
    doc = json.loads((tmp_path / "ok" / "conform.json").read_text())
    ran = [c["id"] for c in doc["checks"] if c["status"] != "skip"]
    assert ran == [c.id for c in CATALOGUE if c.id.startswith("api.")]
    assert (tmp_path / "ok" / "junit.xml").exists()

    with FakeServer({"refuse_429"}) as srv:
        bad = runner.invoke(
            app,
            [
                "conform",
                "--target",
                srv.base_url,
                "--only",
                "zeroqueue",
                "--skip",
                "zeroqueue.5",
                *FAST,
                "--json",
                str(tmp_path / "bad.json"),
            ],
        )
    assert bad.exit_code == 1, bad.output
    assert "FAIL  zeroqueue.7" in bad.output
    doc = json.loads((tmp_path / "bad.json").read_text())
    assert {c["id"] for c in doc["checks"] if c["status"] == "fail"} == {"zeroqueue.7"}
