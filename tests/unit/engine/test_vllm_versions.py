"""vLLM version as a dimension: which interpreter's vLLM a server runs on, what the catalog reads from
it, sweeps over several versions, and the versions view's data (changed vs tie)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from helpers import version_rows
from helpers.paths import LAUNCHERS
from specscope import launch, sweep
from specscope.analysis import versions
from specscope.cli import layout
from specscope.cli import main as cli_main
from specscope.cli import results as cli_results
from specscope.engine import catalog, provenance, vllms
from specscope.engine.presets import MethodEntry, Preset
from specscope.errors import ConfigError
from specscope.launch import host
from specscope.launch.command import VllmInstall, build
from specscope.results.store import Store
from specscope.results.writing import write_results

OWN = vllms.installed_vllm()
needs_vllm = pytest.mark.skipif(OWN is None, reason="vLLM is not installed (launchers/install.sh)")
PRESET = Preset(
    name="tiny",
    path=Path("tiny.toml"),
    engine="vllm-cpu",
    model="org/Target",
    methods={"none": MethodEntry(name="none", kind="none"), "ngram": MethodEntry(name="ngram", kind="ngram", k=4)},
)


@pytest.fixture
def venvs(tmp_path, monkeypatch):
    """An empty .venv-vllm folder for install.sh's venvs."""
    folder = tmp_path / "venvs"
    folder.mkdir()
    monkeypatch.setenv("SPECSCOPE_VLLM_VENVS", str(folder))
    return folder


def _python_at(path: Path, target: str = sys.executable) -> Path:
    """An executable at ``path`` that runs ``target`` (another spelling of an interpreter)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f'#!/bin/sh\nexec "{target}" "$@"\n')
    path.chmod(0o755)
    return path


def test_no_choice_is_this_interpreter(venvs):
    assert vllms.resolve(None) == vllms.resolve("") == sys.executable


@needs_vllm
def test_this_interpreters_own_version_names_it(venvs):
    assert vllms.resolve(OWN[1].split("+")[0]) == sys.executable


def test_a_missing_version_names_the_install_command(venvs):
    with pytest.raises(ConfigError) as info:
        vllms.resolve("0.29.0")
    message = str(info.value)
    assert "launchers/install.sh --vllm 0.29.0" in message and str(venvs / "0.29.0" / "bin" / "python") in message
    assert message.endswith(".") and ". " not in message  # one sentence


def test_a_path_that_is_no_python_is_refused(tmp_path, venvs):
    text = tmp_path / "notes.txt"
    text.write_text("x")
    for choice in (str(tmp_path / "missing" / "python"), str(text)):
        with pytest.raises(ConfigError, match="neither a vLLM version such as 0.30.0 nor a Python that runs"):
            vllms.resolve(choice)


def test_an_installed_version_resolves_to_its_venv(venvs):
    python = _python_at(venvs / "0.31.0" / "bin" / "python")
    assert vllms.resolve("0.31.0") == str(python)
    assert vllms.parse_choices(" 0.31.0, 0.32.0,,0.31.0") == ("0.31.0", "0.32.0")


@needs_vllm
def test_another_interpreters_vllm_and_torch_are_read_from_its_files(tmp_path):
    python = str(_python_at(tmp_path / "env" / "bin" / "python"))
    found = vllms.facts(python, ("arctic_inference", "surely_no_such_package"))
    assert (found.dist, found.version) == OWN and found.vllm_dir == vllms.vllm_dir()
    assert "surely_no_such_package" not in found.packages
    installed = host.installed_vllm(python)
    assert installed.chosen and installed.python == python
    assert installed.server == (python, "-m", launch.command.API_SERVER)
    assert installed.version == OWN[1] and installed.torch == provenance.torch_version()
    assert installed.methods == vllms.installed_methods() and installed.per_request_args == vllms.per_request_args()
    assert provenance.torch_version(python) == provenance.torch_version()


def test_an_interpreter_without_vllm_is_refused(tmp_path):
    python = str(_python_at(tmp_path / "env" / "bin" / "python", target="/usr/bin/env"))  # runs no Python
    with pytest.raises(ConfigError, match="did not run"):
        vllms.facts(python)
    isolated = tmp_path / "iso" / "bin" / "python"
    isolated.parent.mkdir(parents=True)
    isolated.write_text(f'#!/bin/sh\nexec "{sys.executable}" -S "$@"\n')  # without site-packages: no vLLM
    isolated.chmod(0o755)
    with pytest.raises(
        ConfigError,
        match="cannot import vLLM; install a version beside SpecScope's with launchers/install.sh --vllm VERSION",
    ):
        host.installed_vllm(str(isolated))


def test_a_chosen_vllm_names_its_servers_and_records_its_interpreter(tmp_path):
    chosen = VllmInstall(
        "vllm-cpu",
        "0.31.0",
        python="/venvs/0.31.0/bin/python",
        server=("/venvs/0.31.0/bin/python", "-m", launch.command.API_SERVER),
        torch="2.13.0+cpu",
        chosen=True,
    )
    state = build(PRESET, "ngram", vllm=chosen, port=8001, log_dir=tmp_path).state
    assert state.name == "tiny-ngram-k4-vllm0.31.0" and state.argv[0] == "/venvs/0.31.0/bin/python"
    assert (state.vllm_version, state.torch_version, state.python) == (
        "0.31.0",
        "2.13.0+cpu",
        "/venvs/0.31.0/bin/python",
    )
    own = VllmInstall("vllm-cpu", "0.32.0", server=(sys.executable, "-m", launch.command.API_SERVER))
    assert build(PRESET, "ngram", vllm=own, port=8001, log_dir=tmp_path).state.name == "tiny-ngram-k4"


def test_a_cpu_build_that_cannot_verify_drafts_runs_only_the_baseline(tmp_path):
    broken = VllmInstall("vllm-cpu", "0.30.0", speculates=False)
    assert build(PRESET, "none", vllm=broken, port=8001, log_dir=tmp_path).state.kind == "none"
    with pytest.raises(ConfigError, match=r"^vllm-cpu 0.30.0 cannot verify drafts .* use vllm-cpu 0.31.0 or later\.$"):
        build(PRESET, "ngram", vllm=broken, port=8001, log_dir=tmp_path)


def test_the_catalog_reads_a_given_vllm_folder(tmp_path):
    root = tmp_path / "vllm"
    (root / "utils").mkdir(parents=True)
    (root / "config").mkdir()
    (root / "utils" / "cpu_triton_utils.py").write_text(
        f"rejection_greedy_sample_kernel = {vllms.CPU_SAMPLER_BROKEN}\n"
    )
    (root / "config" / "speculative.py").write_text('SpeculativeMethod = Literal["ngram", "suffix"]\n')
    (root / "config" / "observability.py").write_text("per_request_spec_decode_metrics: str = 'none'\n")
    assert not vllms.cpu_speculates(root)
    assert vllms.installed_methods(root) == frozenset({"ngram", "suffix"})
    assert vllms.per_request_args(root) == (catalog.PER_REQUEST_METRICS_FLAG, "detailed")
    assert not vllms.has_k_schedule(root)
    fixed = tmp_path / "fixed" / "vllm"
    (fixed / "utils").mkdir(parents=True)
    (fixed / "utils" / "cpu_triton_utils.py").write_text("rejection_greedy_sample_kernel = impl\n")
    assert vllms.cpu_speculates(fixed) and not vllms.has_k_schedule(fixed)


def _spec(**fields) -> sweep.SweepSpec:
    return sweep.SweepSpec(
        preset="cpu-smollm2", methods=("none", "ngram"), ks=(4,), concurrencies=(1,), prompts=Path("p.jsonl"), **fields
    )


def test_a_sweep_over_versions_runs_one_versions_servers_after_the_others_each_round():
    cells = sweep.plan_cells(_spec(vllm=("0.31.0", "0.32.0"), repeats=2))
    assert [c.cell_id for c in cells] == [
        "none-k0-c1-vllm0.31.0-r1",
        "ngram-k4-c1-vllm0.31.0-r1",
        "none-k0-c1-vllm0.32.0-r1",
        "ngram-k4-c1-vllm0.32.0-r1",
        "none-k0-c1-vllm0.31.0-r2",
        "ngram-k4-c1-vllm0.31.0-r2",
        "none-k0-c1-vllm0.32.0-r2",
        "ngram-k4-c1-vllm0.32.0-r2",
    ]
    assert len({c.group for c in cells}) == 4
    # a sweep that names no vLLM keeps its cell ids and run id
    assert [c.cell_id for c in sweep.plan_cells(_spec())] == ["none-k0-c1", "ngram-k4-c1"]
    assert _spec().resolved_run_id("x") != _spec(vllm=("0.31.0",)).resolved_run_id("x")
    with pytest.raises(ConfigError, match="Running servers keep the vLLM they started on"):
        _spec(vllm=("0.31.0",), servers=(("a", "none", 0),))


class _Launcher:
    """Records which vLLM each server was asked for."""

    def __init__(self):
        self.asked: list[tuple] = []

    def check(self, method, k, vllm=None):
        if vllm == "0.29.0":
            raise ConfigError("vLLM 0.29.0 is not installed beside SpecScope's.")

    def start(self, method, k, vllm=None):
        self.asked.append((method, k, vllm))
        raise ConfigError("no server in a unit test")


def test_the_sweep_asks_the_launcher_for_each_cells_vllm_and_checks_them_all_first(tmp_path, monkeypatch):
    monkeypatch.setenv("SPECSCOPE_HOME", str(tmp_path / "home"))
    prompts = tmp_path / "p.jsonl"
    prompts.write_text(json.dumps({"id": "a", "prompt": "hello"}) + "\n")
    spec = sweep.SweepSpec(
        preset="cpu-smollm2", methods=("none",), ks=(), concurrencies=(1,), prompts=prompts, vllm=("0.31.0", "0.29.0")
    )
    with pytest.raises(ConfigError, match="The sweep cannot start: vLLM 0.29.0 is not installed"):
        sweep.run_sweep(spec, _Launcher())
    launcher = _Launcher()
    with pytest.raises(ConfigError, match="did not start"):
        sweep.run_sweep(
            sweep.SweepSpec(
                preset="cpu-smollm2",
                methods=("none",),
                ks=(),
                concurrencies=(1,),
                prompts=prompts,
                vllm=("0.31.0", "0.32.0"),
            ),
            launcher,
        )
    assert launcher.asked == [("none", 0, "0.31.0")]


def test_each_version_checks_lossless_outputs_against_its_own_baseline():
    def row(method, version):
        return {
            "method": method,
            "k": 4 if method != "none" else 0,
            "concurrency": 1,
            "vllm_version": version,
            "status": "ok",
            "temperature": 0.0,
            "completed": 8,
            "warmups": 1,
            "repeat": 1,
        }

    rows = [row("none", "0.31.0"), row("ngram", "0.31.0"), row("none", "0.32.0"), row("ngram", "0.32.0")]
    outputs = [{"p": "a"}, {"p": "a"}, {"p": "b"}, {"p": "b"}]  # the versions answer differently, each lossless
    checked = sweep.record.with_hygiene(rows, outputs)
    assert [r.get("lossless_mismatches") for r in checked] == [None, 0, None, 0]


@pytest.fixture
def version_store(tmp_path):
    return Store(result_dirs=[version_rows.write(tmp_path)], request_dirs=[tmp_path / "none"])


def test_per_version_divides_each_version_by_its_own_baseline(version_store):
    frame = versions.per_version(version_store)
    assert set(frame["method"]) == {"ngram", "suffix", "eagle"}  # mtp ran on one version only
    ngram = frame[frame["method"] == "ngram"]
    assert ngram["vllm_version"].tolist() == ["0.31.0", "0.32.0"]
    assert ngram["speedup"].tolist() == pytest.approx([1.5, 2.0])
    assert (ngram["speedup_lo"] < ngram["speedup"]).all() and (ngram["speedup"] < ngram["speedup_hi"]).all()


def test_changes_flag_non_overlapping_intervals_and_call_overlaps_ties(version_store):
    found = versions.changes(versions.per_version(version_store)).set_index("setup")
    verdicts = {setup.split(" · ")[1]: (row["verdict"], row["direction"]) for setup, row in found.iterrows()}
    assert verdicts == {"ngram": ("changed", "faster"), "suffix": ("tie", ""), "eagle": ("no interval", "")}
    ngram = found.loc[[s for s in found.index if " · ngram · " in s][0]]
    assert (ngram["from_version"], ngram["to_version"]) == ("0.31.0", "0.32.0")
    assert ngram["ratio"] == pytest.approx(4 / 3)
    assert ngram["to_speedup"].startswith("2.000× [")


def test_verdict_takes_the_one_tie_rule_and_missing_bounds_decide_nothing():
    """Two versions differ where the one rule (``specscope.ties``) tells their speedups apart: touching or even
    slightly overlapping intervals can be apart; wide overlapping ones tie."""
    later = {"speedup": 1.3, "speedup_lo": 1.2, "speedup_hi": 1.4, "repeats": 3}
    assert versions.verdict({"speedup": 1.1, "speedup_lo": 1.0, "speedup_hi": 1.21, "repeats": 3}, later) == "changed"
    assert versions.verdict({"speedup": 1.2, "speedup_lo": 1.05, "speedup_hi": 1.35, "repeats": 3}, later) == "tie"
    assert versions.verdict({"speedup": 1.1, "speedup_lo": None, "speedup_hi": 1.2}, later) == "no interval"


def test_the_cli_table_marks_the_newer_version(version_store):
    table = versions.table(version_store, {"method": ["ngram"]})
    assert table["verdict"].tolist() == ["", "changed"] and table["direction"].tolist() == ["", "faster"]
    assert table["speedup_text"].iloc[0].startswith("1.500× [")
    assert versions.table(version_store, {"method": ["mtp"]}).empty


def test_speedup_by_vllm_version_prints_each_version_and_the_change(version_store, monkeypatch, capsys):
    text = layout.render(versions.speedup_by(version_store, {"method": ["ngram", "suffix"]}))
    lines = text.splitlines()
    assert len(lines) == 5 and "changed faster" in lines[2] and "0.32.0" in lines[2] and "tie" in lines[4]
    records = json.loads(versions.speedup_by(version_store, {"method": ["ngram"]}, as_json=True))
    assert [(r["vllm_version"], r["verdict"]) for r in records] == [("0.31.0", ""), ("0.32.0", "changed")]
    assert records[1]["speedup"] == pytest.approx(2.0) and records[1]["speedup_lo"] > records[0]["speedup_hi"]
    monkeypatch.setattr(cli_results, "Store", lambda: version_store)
    assert cli_main(["speedup", "--by", "vllm_version", "--method", "suffix"]) == 0
    assert "tie" in capsys.readouterr().out


@pytest.mark.parametrize("version", ["abc", "", "0.31"])
def test_install_sh_refuses_a_version_that_is_no_release_number(version):
    import subprocess

    script = LAUNCHERS / "install.sh"
    done = subprocess.run(["bash", str(script), "--vllm", version], capture_output=True, text=True, timeout=30)
    assert done.returncode == 2
    assert done.stderr.strip() == f"install.sh: --vllm needs a release number such as 0.30.0, not '{version}'"


def test_one_vllm_version_with_two_torches_names_each_torch(tmp_path):
    rows = version_rows.rows("0.32.0", [10.0, 10.0], {"ngram": [15.0, 15.2]})
    older = version_rows.rows("0.32.0", [10.0, 10.0], {"ngram": [16.0, 16.2]})
    for row in older:
        row["torch_version"] = None  # a run that predates recording it
    other = version_rows.rows("0.31.0", [10.0, 10.0], {"ngram": [14.0, 14.1]})
    for run, found in (("a", rows), ("b", older), ("c", other)):
        for row in found:
            row["run_id"] = run
        write_results(found, run_id=run, directory=tmp_path)
    frame = versions.per_version(Store(result_dirs=[tmp_path], request_dirs=[tmp_path / "none"]))
    assert frame["version"].tolist() == ["0.31.0", "0.32.0 (torch ?)", "0.32.0 (torch 2.13.0+cpu)"]
    assert versions.changes(frame)["from_version"].tolist() == ["0.31.0", "0.32.0 (torch ?)"]
