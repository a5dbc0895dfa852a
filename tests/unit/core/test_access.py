"""Operators and viewers: the token (its comparison, its file's permissions, rotation), the library's
refusals when a viewer acts, one sweep at a time, and what attaching reads."""

from __future__ import annotations

import json
import os
import re
import stat
import threading
from types import SimpleNamespace

import pytest

from helpers.local_http import Answering, serving
from specscope import access, launch, live, sweep
from specscope.client import probe
from specscope.client.stream import GenerationRequest
from specscope.engine import models
from specscope.errors import Busy, ConfigError, NotAllowed
from specscope.prompts import library
from specscope.results import datasets, importers

VIEWER = access.Actor("viewer session 1234abcd", operator=False)
OPERATOR = access.Actor("operator session 5678ef00", operator=True)
SECRET_MARK = "do-not-echo-this-body"


def test_token_is_made_once_and_matches_in_constant_time(specscope_home, monkeypatch):
    compared = []
    real = access.hmac.compare_digest
    monkeypatch.setattr(access.hmac, "compare_digest", lambda a, b: compared.append((a, b)) or real(a, b))
    value = access.token()
    assert len(value) >= 40 and access.token() == value
    assert access.matches(value) and access.matches(f"  {value}\n")
    assert not access.matches(value[:-1] + ("A" if value[-1] != "A" else "B"))  # same length, one char off
    assert not access.matches(value[:-1]) and not access.matches("") and not access.matches(None)
    assert len(compared) == 4  # every candidate went through hmac.compare_digest (empty ones never reach it)


def test_token_file_is_readable_by_its_owner_only(specscope_home):
    old_umask = os.umask(0)  # the loosest umask: the file must still come out 0600
    try:
        access.token()
    finally:
        os.umask(old_umask)
    mode = stat.S_IMODE(access.token_path().stat().st_mode)
    assert mode == 0o600, oct(mode)
    assert access.token_path().parent == specscope_home


def test_token_file_others_could_read_is_replaced(specscope_home, caplog):
    first = access.token()
    access.token_path().chmod(0o644)
    second = access.token()
    assert second != first and not access.matches(first)
    assert stat.S_IMODE(access.token_path().stat().st_mode) == 0o600
    assert first not in caplog.text and second not in caplog.text  # never logged
    assert "could be read by other users" in caplog.text


def test_rotate_ends_the_old_token(specscope_home):
    old = access.token()
    new = access.rotate()
    assert new != old and access.matches(new) and not access.matches(old)
    assert stat.S_IMODE(access.token_path().stat().st_mode) == 0o600


def test_the_local_user_operates_and_a_viewer_is_refused(specscope_home):
    assert access.require("start a server").who.startswith("CLI user ")
    with access.acting_as(VIEWER), pytest.raises(NotAllowed, match="Viewers cannot start a server"):
        access.require("start a server")
    with access.acting_as(OPERATOR):
        assert access.require("start a server") == OPERATOR


def test_an_installed_resolver_decides_and_acting_as_overrides_it(specscope_home):
    access.install(lambda: VIEWER)
    try:
        assert access.current() == VIEWER
        with access.acting_as(OPERATOR):
            assert access.current() == OPERATOR
        done = []
        thread = threading.Thread(target=lambda: done.append(access.current()))  # the resolver still says
        thread.start()
        thread.join()
        assert done == [VIEWER]
    finally:
        access.install(None)
    assert access.current().operator


def _refusals(tmp_path, plan):
    bundled = sorted(library.bundled_sets())[0]
    session_specs = [live.PaneSpec("a", "http://127.0.0.1:9"), live.PaneSpec("b", "http://127.0.0.1:9")]
    session = live.LiveSession.create(session_specs, GenerationRequest(prompt="hi", max_tokens=4), "fair")
    return {
        "stop": lambda: launch.stop("anything"),
        "stop_all": launch.stop_all,
        "attach": lambda: launch.attach("http://127.0.0.1:9"),
        "forget": lambda: launch.forget("anything"),
        "cleanup": launch.cleanup_stale,
        "start": lambda: launch.start(plan),
        "import": lambda: importers.import_upload("r.json", b"{}"),
        "ruiz": lambda: datasets.download_ruiz(url="http://127.0.0.1:9/x"),
        "prompt set": lambda: library.save(bundled.read_bytes(), bundled.name),
        "models": lambda: models.prepare(tmp_path / "models"),
        "sweep": lambda: sweep.lock.take("run-1"),
        "sweep on a cluster": lambda: sweep.claim(SimpleNamespace(run_id="run-1"), sweep.OnRay("127.0.0.1:9")),
        "live": session.start,
        "live session": lambda: live.LiveSession.create(session_specs, GenerationRequest(prompt="hi"), "fair"),
    }


@pytest.mark.parametrize(
    "action",
    [
        "stop",
        "stop_all",
        "attach",
        "forget",
        "cleanup",
        "start",
        "import",
        "ruiz",
        "prompt set",
        "models",
        "sweep",
        "sweep on a cluster",
        "live",
        "live session",
    ],
)
def test_every_changing_call_refuses_a_viewer_before_it_does_anything(specscope_home, tmp_path, action):
    plan = launch.plan_for("cpu-smollm2", "none") if action == "start" else None  # needs vLLM installed
    call = _refusals(tmp_path, plan)[action]
    before = sorted(p.relative_to(specscope_home) for p in specscope_home.rglob("*"))
    with access.acting_as(VIEWER), pytest.raises(NotAllowed):
        call()
    assert sorted(p.relative_to(specscope_home) for p in specscope_home.rglob("*")) == before


def test_one_sweep_at_a_time_names_who_holds_it(specscope_home):
    with access.acting_as(OPERATOR):
        lock = sweep.lock.take("run-a")
        with pytest.raises(Busy, match=r"run-a, started by operator session 5678ef00"):
            sweep.lock.take("run-b")
        lock.release()
        with sweep.lock.machine("run-b"):
            assert sweep.lock.holder()["run_id"] == "run-b"
    assert sweep.lock.holder() is None


class _Answers(Answering):
    """/v1/models: a listed model, or (path /big/...) 3 MiB, with or without a Content-Length."""

    def do_GET(self):  # noqa: N802 - the http.server API
        if self.path.startswith("/big"):
            body = (SECRET_MARK * (3 * 2**20 // len(SECRET_MARK) + 1)).encode()
            if "chunked" in self.path:
                self.send_response(200)
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                for start in range(0, len(body), 65536):
                    part = body[start : start + 65536]
                    self.wfile.write(f"{len(part):x}\r\n".encode() + part + b"\r\n")
                self.wfile.write(b"0\r\n\r\n")
                return
            self.answer(body)
            return
        if self.path == "/v1/models":
            body = json.dumps({"data": [{"id": "tiny-model"}]}).encode()
        elif self.path == "/version":
            body = b'{"version": "0.0-test"}'
        else:
            body = b""
        self.answer(body, 200 if body else 404)


@pytest.fixture
def answers_url():
    with serving(_Answers) as url:
        yield url


@pytest.mark.parametrize(
    "url", ["file:///etc/passwd", "gopher://127.0.0.1:70/_stats", "ftp://host/x", "127.0.0.1:8000", "http://"]
)
def test_attach_refuses_anything_but_http(specscope_home, url):
    with pytest.raises(ConfigError, match="over http\\(s\\) only") as caught:
        launch.attach(url)
    assert "passwd" not in str(caught.value) and not list(specscope_home.glob("servers/*.json"))


@pytest.mark.parametrize("where", ["big", "big/chunked"])
def test_attach_refuses_an_oversized_answer_without_showing_it(specscope_home, answers_url, where):
    with pytest.raises(probe.AnswerTooLarge, match="more than 2 MiB") as caught:
        launch.attach(f"{answers_url}/{where}")
    assert SECRET_MARK not in str(caught.value) and not list(specscope_home.glob("servers/*.json"))


def test_attach_records_who_attached(specscope_home, answers_url):
    with access.acting_as(OPERATOR):
        state = launch.attach(answers_url)
    assert (state.model, state.vllm_version, state.started_by) == ("tiny-model", "0.0-test", OPERATOR.who)
    assert launch.find(state.name).started_by == OPERATOR.who


@pytest.mark.parametrize(
    "store, endpoint",
    [
        ("s3://AKIAEXAMPLE:very-secret-key@team/specscope", ""),
        ("s3://team/specscope?secret=very-secret-key", ""),
        ("s3://team/specscope", "https://AKIAEXAMPLE:very-secret-key@s3.example.internal"),
    ],
)
def test_s3_keys_in_a_url_are_refused_without_repeating_them(monkeypatch, store, endpoint):
    from specscope.results import shared

    monkeypatch.setenv("SPECSCOPE_STORE", store)
    monkeypatch.setenv("AWS_ENDPOINT_URL", endpoint)
    with pytest.raises(ConfigError, match="carries credentials") as caught:
        shared.location()
    assert "very-secret-key" not in str(caught.value) and "AKIAEXAMPLE" not in str(caught.value)


def test_cli_token_prints_and_rotates_it(specscope_home, capsys):
    from specscope.cli import main

    assert main(["token"]) == 0
    first = capsys.readouterr().out.strip()
    assert access.matches(first) and stat.S_IMODE(access.token_path().stat().st_mode) == 0o600
    assert main(["token", "--rotate"]) == 0
    second = capsys.readouterr().out.strip()
    assert second != first and access.matches(second) and not access.matches(first)


def test_ps_says_who_started_each_server_and_when(specscope_home, answers_url, capsys):
    from specscope.cli import main

    with access.acting_as(OPERATOR):
        launch.attach(answers_url, name="team-box")
    assert main(["ps", "--json"]) == 0
    row = json.loads(capsys.readouterr().out)[0]
    assert row["started_by"] == OPERATOR.who and row["started_at"][:4].isdigit()
    assert main(["ps"]) == 0
    table = capsys.readouterr().out
    assert "STARTED BY" in table and OPERATOR.who in table.splitlines()[1]


def test_dashboards_starting_at_once_share_one_token(specscope_home):
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(8) as pool:
        made = set(pool.map(lambda _: access.token(), range(32)))
    assert made == {access.token()} and not list(specscope_home.glob(".operator-token.*"))


def test_an_operator_pass_is_signed_with_the_token_and_ends_with_rotation_or_revocation(specscope_home):
    value = access.issue_pass()
    assert access.pass_valid(value) and access.token() not in value
    assert not access.pass_valid(value[:-1] + ("0" if value[-1] != "0" else "1"))  # forged signature
    assert not access.pass_valid("") and not access.pass_valid(None) and not access.pass_valid("no-dot")
    nonce = access.offer(value)
    assert access.claim(nonce) == value and access.claim(nonce) is None  # once only
    assert access.claim("unknown") is None
    other = access.issue_pass()
    access.revoke(other)
    assert not access.pass_valid(other) and access.pass_valid(value)
    access.rotate()
    assert not access.pass_valid(value)  # every pass signed with the old token is void


def test_the_address_handed_out_is_the_public_url_where_one_is_set(monkeypatch):
    monkeypatch.delenv(access.PUBLIC_URL_ENV, raising=False)
    assert access.public_url(8501, "0.0.0.0") == f"http://{access.lan_address()}:8501"
    assert access.public_url(8502, "10.1.2.3") == "http://10.1.2.3:8502"
    monkeypatch.setenv(access.PUBLIC_URL_ENV, "http://demo-host:8501/")  # a container published on demo-host
    assert access.public_url(8501, "0.0.0.0") == "http://demo-host:8501"
    assert (
        access.public_url(8501, "0.0.0.0", setting="https://proxy.example/specscope")
        == "https://proxy.example/specscope"
    )
    assert access.public_url(8501, "10.1.2.3", setting="") == "http://10.1.2.3:8501"
    for wrong in ("demo-host:8501", "ftp://demo-host", "http://demo-host:port", "http://demo-host/?a=1"):
        monkeypatch.setenv(access.PUBLIC_URL_ENV, wrong)
        with pytest.raises(
            ConfigError,
            match=rf"^SPECSCOPE_PUBLIC_URL='{re.escape(wrong)}' is not an address "
            r"viewers can open; give one such as http://demo-host:8501 \(.*\)\.$",
        ):
            access.public_url(8501)
