"""The target resolver (zqbench.target.resolve): one rule for the model and the API of a --target,
used by run, sweep, probe and conform, checked before any load."""

from __future__ import annotations

import importlib.metadata
import json
from pathlib import Path

import pytest
from markupsafe import escape

from tests.conform.fake_server import MODEL as FAKE_MODEL
from tests.conform.fake_server import FakeServer
from tests.core.conftest import MODEL, REPO, write_scenario, zqbench
from tests.core.test_run_cli import QUICK, closed_port, one_error_line
from tests.servers import ProgrammedServer
from zqbench.conform import ConformOptions, run_conformance
from zqbench.dialects.common import error_message
from zqbench.errors import TargetError, UsageError
from zqbench.pipeline.run import RunOptions, run_scenario
from zqbench.target.embedded import EmbeddedServer
from zqbench.target.probe import ProbeOptions, run_probe
from zqbench.target.resolve import Access, Wanted, resolve_target

MESSAGES = ("POST", "/v1/messages")
CHAT = ("POST", "/v1/chat/completions")
MODELS = ("GET", "/v1/models")


def calls(server: FakeServer) -> list[tuple[str, str]]:
    return [(method, path) for method, path, _ in server.requests]


# ---------------------------------------------------------------------- the model


def test_one_listed_model_is_used_and_both_apis_found() -> None:
    with FakeServer(models=("tiny",)) as server:
        res = resolve_target(Access(server.base_url), Wanted(prefer="openai"))
        assert calls(server) == [MODELS, CHAT, MESSAGES]  # the preferred API first
    assert (res.model, res.api, res.apis) == ("tiny", "openai", ("openai", "anthropic"))
    record = res.record
    assert (record.model_source, record.api_source, record.models) == (
        "discovered",
        "scenario",
        ["tiny"],
    )
    assert [(p.api, p.path, p.status, p.error) for p in record.probes] == [
        ("openai", "/v1/chat/completions", 200, None),
        ("anthropic", "/v1/messages", 200, None),
    ]
    assert res.model_note == ""
    assert (
        res.api_note
        == "api openai: the target answers openai and anthropic; the scenario's is used"
    )
    assert record.describe() == (
        "model tiny (discovered from GET /v1/models), "
        "api openai (the scenario's: openai 200, anthropic 200)"
    )


def test_several_models_take_the_first_with_a_note_or_fail_when_strict() -> None:
    with FakeServer(models=("a", "b", "c")) as server:
        res = resolve_target(Access(server.base_url), Wanted())
        assert res.model == "a"
        assert res.model_note == (
            "model a: the first of the 3 models GET /v1/models lists (a, b, c); "
            "name another with --model"
        )
        with pytest.raises(UsageError) as strict:
            resolve_target(Access(server.base_url), Wanted(strict_model=True))
        assert strict.value.message == (
            "target lists 3 models at GET /v1/models (a, b, c); name one with --model"
        )


def test_a_model_list_past_64_kib_is_read_whole() -> None:
    names = tuple(f"org/model-{i:05d}-instruct" for i in range(3000))  # about 150 KiB
    with FakeServer(models=names) as server:
        res = resolve_target(Access(server.base_url), Wanted())
    assert res.model == names[0] and len(res.record.models) == 3000


@pytest.mark.parametrize(
    ("server_args", "message"),
    [
        ({"models": ()}, "target lists no models at GET /v1/models; name one with --model"),
        ({"models": None}, "target has no GET /v1/models (404); name the model with --model"),
        (
            {"models_body": b"<html>models</html>"},
            "target's GET /v1/models is not JSON; name the model with --model",
        ),
        (
            {"models_body": b'{"models": ["a"]}'},
            "target's GET /v1/models holds no model list; name the model with --model",
        ),
        (
            {"api_key": "right-key"},
            "target's GET /v1/models answered 401 no key; "
            "name the variable holding the key with --api-key-env",
        ),
    ],
)
def test_no_model_to_discover_is_exit_2_naming_the_fix(
    server_args: dict[str, object], message: str
) -> None:
    with FakeServer(**server_args) as server:  # type: ignore[arg-type]
        with pytest.raises(UsageError) as no_model:
            resolve_target(Access(server.base_url), Wanted())
        assert no_model.value.message == message
        assert [c for c in calls(server) if c != MODELS] == []  # nothing else was sent


def test_a_named_model_needs_no_listing() -> None:
    with FakeServer(models=None) as server:
        res = resolve_target(Access(server.base_url), Wanted(model=FAKE_MODEL, apis=("openai",)))
    assert (res.model, res.api, res.record.models) == (FAKE_MODEL, "openai", [])
    assert res.record.describe() == f"model {FAKE_MODEL} (--model), api openai (--api: openai 200)"


def test_a_named_model_answered_by_another_listed_one_is_exit_2() -> None:
    """llama.cpp's server answers any model asked for with the one it serves: the run would
    measure another model than the one named."""
    with (
        FakeServer(models=(FAKE_MODEL,), any_model=True) as server,
        pytest.raises(UsageError) as wrong,
    ):
        resolve_target(Access(server.base_url), Wanted(model="nope"))
    assert wrong.value.message == (
        f"model 'nope' is not served by the target: GET /v1/models lists {FAKE_MODEL} and it "
        f"answered as {FAKE_MODEL!r}; name a listed model with --model, or drop --model"
    )


def test_a_named_model_not_listed_but_answered_otherwise_is_a_warning() -> None:
    # Its answer names a model the listing lacks too (an alias, a partial listing): go on.
    with FakeServer(models=("tiny",), any_model=True) as server:
        res = resolve_target(Access(server.base_url), Wanted(model="nope"))
    assert res.model == "nope"
    assert "warning: model nope is not among the models GET /v1/models lists (tiny)" in (res.notes)


def test_the_key_goes_in_both_apis_headers() -> None:
    with FakeServer(api_key="sk-test-0123456789") as server:
        res = resolve_target(Access(server.base_url, api_key="sk-test-0123456789"), Wanted())
        _, _, headers = server.requests[0]
    assert res.model == FAKE_MODEL
    assert headers["authorization"] == "Bearer sk-test-0123456789"
    assert headers["x-api-key"] == "sk-test-0123456789"
    assert headers["anthropic-version"] == "2023-06-01"
    assert "sk-test" not in repr(res)


# ---------------------------------------------------------------------- a wrong model


@pytest.mark.parametrize("apis", [(), ("anthropic",), ("openai",)])
def test_a_refused_model_is_exit_2_in_the_servers_words(apis: tuple[str, ...]) -> None:
    with FakeServer() as server, pytest.raises(UsageError) as wrong:
        resolve_target(Access(server.base_url), Wanted(model="wrong", apis=apis))
    assert wrong.value.message == (
        "model 'wrong' refused by the target: 404 The model `wrong` does not exist. "
        f"(GET /v1/models lists: {FAKE_MODEL})"
    )


def test_the_model_refusal_wins_over_a_missing_route() -> None:
    """An openai-only target: /v1/messages is absent, the model refusal is the news."""
    with FakeServer(apis=("openai",), models=None) as server, pytest.raises(UsageError) as wrong:
        resolve_target(Access(server.base_url), Wanted(model="wrong"))
    assert wrong.value.message == (
        "model 'wrong' refused by the target: 404 The model `wrong` does not exist."
    )


@pytest.mark.parametrize(
    ("body", "words"),
    [
        (  # vLLM
            {
                "error": {
                    "message": "The model `wrong` does not exist.",
                    "type": "NotFoundError",
                    "param": "model",
                    "code": 404,
                }
            },
            "The model `wrong` does not exist.",
        ),
        (  # older vLLM, flat
            {"object": "error", "message": "The model `wrong` does not exist.", "code": 404},
            "The model `wrong` does not exist.",
        ),
        (
            {"type": "error", "error": {"type": "not_found_error", "message": "model: wrong"}},
            "model: wrong",
        ),
        ({"detail": "Not Found"}, None),  # FastAPI's missing route: no words of an API
        ({"error": {"type": "x", "message": " "}}, None),
    ],
)
def test_the_servers_words_are_the_error_objects_message(body: object, words: str | None) -> None:
    assert error_message(body) == words


# ---------------------------------------------------------------------- the API


BOTH = ("anthropic", "openai")


@pytest.mark.parametrize(
    ("served", "prefer", "apis", "source", "described"),
    [
        (
            ("anthropic",),
            "openai",
            ("anthropic",),
            "detected",
            "(detected: openai 404, anthropic 200)",
        ),
        (
            ("openai",),
            "anthropic",
            ("openai",),
            "detected",
            "(detected: anthropic 404, openai 200)",
        ),
        (BOTH, "anthropic", BOTH, "scenario", "(the scenario's: anthropic 200, openai 200)"),
        (BOTH, "openai", BOTH[::-1], "scenario", "(the scenario's: openai 200, anthropic 200)"),
        (BOTH, None, BOTH, "detected", "(detected: anthropic 200, openai 200)"),
    ],
)
def test_auto_finds_the_api_the_target_speaks(
    served: tuple[str, ...],
    prefer: str | None,
    apis: tuple[str, ...],
    source: str,
    described: str,
) -> None:
    with FakeServer(apis=served) as server:
        res = resolve_target(Access(server.base_url), Wanted(prefer=prefer))
    assert (res.api, res.apis, res.record.api_source) == (apis[0], apis, source)
    assert res.record.describe().endswith(f"api {apis[0]} {described}")


def test_a_named_api_the_target_lacks_is_exit_2() -> None:
    with FakeServer(apis=("anthropic",)) as server, pytest.raises(UsageError) as wrong_api:
        resolve_target(Access(server.base_url), Wanted(apis=("openai",)))
    assert wrong_api.value.message == (
        "api openai: the target does not serve it (POST /v1/chat/completions: 404); "
        "name another with --api, or detect it with --api auto"
    )


def test_a_target_with_neither_api_is_exit_2() -> None:
    with FakeServer(apis=()) as server, pytest.raises(UsageError) as neither:
        resolve_target(Access(server.base_url), Wanted())
    assert neither.value.message == (
        "target serves neither API (POST /v1/messages: 404, POST /v1/chat/completions: 404); "
        "check --target (a base URL has no /v1)"
    )


@pytest.mark.parametrize(
    ("program", "said"),
    [
        ("/status?code=503", "HTTP 503"),
        pytest.param("/hang", "no complete answer within 0.5 s", marks=pytest.mark.slow),
        ("/delay?ms=0&size=5", "200 not openai's answer (bad_json)"),
    ],
)
def test_an_unsure_check_is_a_warning_not_an_error(program: str, said: str) -> None:
    """A target that fails the check otherwise than by refusing (a 5xx, no answer) is still
    measured: a run records what a misbehaving server does."""
    with ProgrammedServer() as server:
        access = Access(server.url, extra_headers=(("x-program", program),), timeout_s=0.5)
        named = resolve_target(access, Wanted(model="m", apis=("openai",)))
        detected = resolve_target(access, Wanted(model="m", prefer="openai"))
    assert (named.api, named.record.api_source) == ("openai", "option")
    assert named.notes == (
        f"warning: api openai not confirmed: POST /v1/chat/completions: {said}; going on",
    )
    assert (detected.api, detected.apis, detected.record.api_source) == (
        "openai",
        ("openai",),
        "scenario",
    )
    assert detected.notes == named.notes


def test_a_target_that_does_not_answer_is_exit_3() -> None:
    with pytest.raises(TargetError):
        resolve_target(Access(f"http://127.0.0.1:{closed_port()}"), Wanted())


# ---------------------------------------------------------------------- run, sweep


@pytest.mark.slow
def test_run_with_a_wrong_model_sends_no_load_and_leaves_no_folder(tmp_path: Path) -> None:
    with FakeServer() as server:
        res = zqbench(
            "run",
            "smoke",
            "--target",
            server.base_url,
            "--model",
            "wrong",
            cwd=tmp_path,
            env={"PYTHONPATH": str(REPO)},
        )
        sent = calls(server)
    assert res.returncode == 2, res.stderr
    assert one_error_line(res.stderr) == (
        "zqbench: error: model 'wrong' refused by the target: 404 The model `wrong` does "
        f"not exist. (GET /v1/models lists: {FAKE_MODEL})"
    )
    assert sent == [MODELS, MESSAGES, CHAT]  # the check requests, then nothing
    assert list(tmp_path.iterdir()) == []  # not even reports/


@pytest.mark.parametrize("failure", ["wrong model", "unreachable"])
def test_a_failed_start_leaves_no_folder(tmp_path: Path, failure: str) -> None:
    root = tmp_path / "made" / "reports"
    with FakeServer() as server:
        target = (
            server.base_url if failure == "wrong model" else f"http://127.0.0.1:{closed_port()}"
        )
        options = RunOptions.of(scenario="smoke", target=target, model="wrong", reports_root=root)
        with pytest.raises((UsageError, TargetError)):
            run_scenario(options)
        out = RunOptions.of(
            scenario="smoke", target=target, model="wrong", out=tmp_path / "a" / "b"
        )
        with pytest.raises((UsageError, TargetError)):
            run_scenario(out)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow
def test_sweep_with_a_wrong_model_leaves_no_folder(tmp_path: Path) -> None:
    with FakeServer() as server:
        res = zqbench(
            "sweep",
            "--target",
            server.base_url,
            "--model",
            "wrong",
            "--out",
            str(tmp_path / "sweep"),
        )
        assert [c for c in calls(server) if c[0] == "POST"] == [MESSAGES, CHAT]
    assert res.returncode == 2, res.stderr
    assert "model 'wrong' refused by the target: 404" in one_error_line(res.stderr)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow
def test_several_models_note_the_first_or_fail_when_strict(tmp_path: Path) -> None:
    with FakeServer(models=("a", "b")) as server:
        strict = zqbench(
            "run",
            "smoke",
            "--target",
            server.base_url,
            "--strict-model",
            "--out",
            str(tmp_path / "x"),
        )
        assert [c for c in calls(server) if c[0] == "POST"] == []
    assert strict.returncode == 2
    assert one_error_line(strict.stderr) == (
        "zqbench: error: target lists 2 models at GET /v1/models (a, b); name one with --model"
    )
    assert list(tmp_path.iterdir()) == []


TINY = QUICK.format(rate=10, duration="1s")


@pytest.mark.slow
def test_run_against_an_openai_only_target_detects_openai(tmp_path: Path) -> None:
    scenario = write_scenario(tmp_path, TINY)
    out = tmp_path / "run"
    with FakeServer(apis=("openai",), models=("tiny",), slots=16) as server:
        res = zqbench(
            "run", str(scenario), "--target", server.base_url, "--out", str(out), "--quiet"
        )
        posts = [path for method, path in calls(server) if method == "POST"]
    assert res.returncode in (0, 1, 4), res.stderr  # ran (10 requests may be too few: 4)
    assert (
        f"target {server.base_url}: model tiny (discovered from GET /v1/models), "
        "api openai (detected: anthropic 404, openai 200)"
    ) in res.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["api"] == "openai"
    assert summary["target_resolution"] == {
        "model": "tiny",
        "model_source": "discovered",
        "api": "openai",
        "api_source": "detected",
        "models": ["tiny"],
        "probes": [
            {**summary["target_resolution"]["probes"][0], "api": "anthropic", "status": 404},
            {
                **summary["target_resolution"]["probes"][1],
                "api": "openai",
                "status": 200,
                "error": None,
            },
        ],
    }
    assert summary["target_resolution"]["probes"][0]["error"] == "HTTP 404"
    # The two check requests, then only the openai route: the load spoke openai.
    assert posts[:2] == ["/v1/messages", "/v1/chat/completions"]
    assert set(posts[2:]) == {"/v1/chat/completions"} and len(posts) >= 2 + 10


@pytest.mark.slow
def test_run_with_target_alone_against_the_reference_server(
    ref_server: EmbeddedServer, tmp_path: Path
) -> None:
    """`zqbench run smoke --target URL`, no other flag: model and API are found."""
    res = zqbench(
        "run",
        "smoke",
        "--target",
        ref_server.base_url,
        cwd=tmp_path,
        env={"PYTHONPATH": str(REPO)},
    )
    # 4 (invalid) when a busy machine made the generator late: outputs are written all the
    # same, and this test is about what was discovered, not about the generator.
    assert res.returncode in (0, 4), res.stdout + res.stderr
    (out,) = (tmp_path / "reports").iterdir()
    summary = json.loads((out / "summary.json").read_text())
    line = (
        f"model {MODEL} (discovered from GET /v1/models), "
        "api anthropic (the scenario's: anthropic 200, openai 200)"
    )
    assert summary["target_resolution"]["model"] == MODEL
    assert f"target: {line}\n" in (out / "summary.md").read_text()
    assert f"target: {escape(line)}</p>" in (out / "report.html").read_text()


# ---------------------------------------------------------------------- probe, conform


def test_probe_with_no_model_or_api(ref_server: EmbeddedServer) -> None:
    notes: list[str] = []
    report = run_probe(ProbeOptions(target=ref_server.base_url, n=3), on_note=notes.append)
    assert report.ok and report.ok_count == 3
    assert notes == [
        f"target: model {MODEL} (discovered from GET /v1/models), "
        "api anthropic (detected: anthropic 200, openai 200)",
        "api anthropic: the target answers anthropic and openai; the first is used",
    ]


@pytest.mark.slow
def test_probe_cli_refuses_a_wrong_model_before_probing(ref_server: EmbeddedServer) -> None:
    res = zqbench("probe", "--target", ref_server.base_url, "--model", "nope", "-n", "2")
    assert res.returncode == 2
    assert one_error_line(res.stderr) == (
        "zqbench: error: model 'nope' refused by the target: 404 model: 'nope' not found; "
        f"serving '{MODEL}' (GET /v1/models lists: {MODEL})"
    )


@pytest.mark.parametrize(
    ("served", "apis"), [(BOTH, BOTH), (("openai",), ("openai",)), (("anthropic",), ("anthropic",))]
)
def test_conform_discovers_the_model_and_the_apis(
    served: tuple[str, ...], apis: tuple[str, ...]
) -> None:
    with FakeServer(models=("tiny",), apis=served) as server:
        options = ConformOptions(target=server.base_url, apis=(), only=("api",))
        report = run_conformance(options)
    assert (report.model, report.apis) == ("tiny", apis)
    assert report.options["apis"] == apis
    passed = {o.group for o in report.outcomes if o.status == "pass"}
    assert passed == {f"api.{api}" for api in apis}  # each API found is checked, and passes


@pytest.mark.slow
def test_conform_cli_detects_by_default_and_fails_on_a_wrong_model() -> None:
    with FakeServer(apis=("openai",)) as server:
        wrong = zqbench("conform", "--target", server.base_url, "--model", "wrong")
        ok = zqbench("conform", "--target", server.base_url, "--only", "api")
    assert wrong.returncode == 2
    assert one_error_line(wrong.stderr) == (
        "zqbench: error: model 'wrong' refused by the target: 404 The model `wrong` does "
        f"not exist. (GET /v1/models lists: {FAKE_MODEL})"
    )
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert (
        f"target: model {FAKE_MODEL} (discovered from GET /v1/models), "
        "api openai (detected: anthropic 404, openai 200)"
    ) in ok.stderr


# ---------------------------------------------------------------------- --version


def test_version() -> None:
    res = zqbench("--version")
    assert res.returncode == 0
    assert res.stdout == f"zqbench {importlib.metadata.version('zqbench')}\n"
