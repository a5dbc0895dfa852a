"""Sweeps: methods x K x concurrency on one preset, resumable, one canonical row per cell.

Each (method, K) is one server, started through a ``Launcher`` (``PresetLauncher`` wraps
``specscope.launch``) before its first cell and stopped after its last. Each finished
cell is saved under ``runs_dir()/<run_id>/cells/<cell>.json``, and the run's Parquet files
(results and per-request rows) are rewritten from those after every cell, so a killed sweep
loses only the cell it was in. Rerunning the same sweep (same run id, derived from its spec
and the prompt set's hash) skips every cell that finished ``ok``; failed cells run again.
A server that dies marks its cell ``failed`` with the reason; the sweep goes on with the
next cell (restarting the server). ``restart_each_cell`` gives every cell a fresh server, so
no cell inherits another's caches (suffix decoding learns from earlier responses, and the
prefix cache holds earlier prompts).

Sweeps do not collide with servers already running: a healthy launched server configured
exactly as a cell needs (same preset, method, K, engine arguments and vLLM) is measured as it
is and left running, with the requests it answered before counted as ``prior_requests`` (so
the hygiene checks see its caches); otherwise the sweep starts its own server under a free
name (``cpu-smollm2-none-2``). ``SweepSpec.servers`` measures known servers instead
(attached or launched, K fixed per server) over concurrency only (``servers_spec``).
A problem that would fail every cell (the model not prepared, vLLM missing, a method this
machine cannot run, the first server not starting) stops the sweep with one ConfigError
before anything is measured, and leaves no empty run behind.

With ``repeats`` N > 1 every cell is measured N times, each repeat its own row (``repeat``
1..N, cell id suffix ``-r2`` ...). Repeats run in rounds: round 1 measures every cell of every
server (the baseline included), then round 2 measures them all again, so no cell's repeats run
back to back and each repeat sees the run's whole range of machine states. Servers a launcher
can hold together stay up for the whole run; where it holds fewer (``max_servers``: as many as
memory holds), the server needed furthest ahead sleeps (a GPU server in sleep mode) or is stopped and
started again when its turn comes (``baseline_alongside`` keeps the baseline's server up beside them).
Every server gets unmeasured warm-up requests at its first cell's concurrency and output
length before that cell (``specscope.client.warmup``), on top of each cell's own ``warmups``; a GPU
server that drafts, measured above concurrency 1, also gets batches that grow and shrink (``warmup.ramp``).
Every row gets the ids of the hygiene checks it fails (``specscope.results.hygiene``).

``structured`` runs each cell free (``free``, the prompts' response formats left out), constrained
(``constrained``: each prompt that carries a format sent with it; prompts without one are left out
of constrained cells) or both (``both``: a constrained cell beside each free one, on the same server,
id suffix ``-constrained``); ``structured_default`` picks both for a set whose prompts carry formats.
Rows record it in ``response_format``. Warm-ups send each format the constrained cells will send.

``vllm`` runs the preset on several vLLMs (versions installed by ``launchers/install.sh --vllm``, or
Python paths): in each round one vLLM's servers after the other's, each with its own baseline; rows
record the vLLM and torch of the interpreter that served them.

    spec = SweepSpec(preset="cpu-smollm2", methods=("none", "ngram"), ks=(1, 2, 4),
                     concurrencies=(1, 4), prompts=Path("data/prompts/code-editing.jsonl"))
    result = execute(resolve(spec), Here(), LaunchOptions(), progress=print)

The rooms: ``spec`` (what a sweep is), ``synthetic`` (drafts accepted synthetically), ``plan`` (its cells,
and the spec resolved once into a ``SweepPlan``), ``server`` (a sweep's server and the ``Launcher`` protocol),
``launchers`` (how a server of one (method, K) is started or found), ``options`` (the ``LaunchOptions`` every
executor takes), ``pool`` (which servers are up when), ``measure`` (one cell),
``record`` (checkpoints, Parquet, and the ``Recorder`` every finished cell goes to), ``lock`` (one sweep
at a time here, one process at a time on a run), ``run`` (the loop here), ``lane`` (one lane's cells in
order on its servers), ``on_ray`` (the Ray executor),
``execute`` (the one door: here or on Ray, under the lock), ``progress`` and ``job`` (a sweep on a
background thread).
"""

from specscope.sweep.execute import Here, OnRay, Where, claim, execute
from specscope.sweep.job import SweepJob
from specscope.sweep.lane import Advise
from specscope.sweep.launchers import PresetLauncher, ServersLauncher
from specscope.sweep.on_ray import configured_address as ray_address
from specscope.sweep.options import LaunchOptions, launcher_for
from specscope.sweep.plan import SweepPlan, as_plan, describe, plan_cells, resolve
from specscope.sweep.record import (
    FinishedCell,
    Recorder,
    SweepResult,
    finished_cells,
    run_dir,
    run_hygiene,
    save_cell,
    write_run,
)
from specscope.sweep.run import run_sweep
from specscope.sweep.server import Launcher, RunningServer
from specscope.sweep.spec import (
    STRUCTURED,
    Cell,
    SweepSpec,
    method_ks,
    parse_ints,
    requests_of,
    servers_spec,
    structured_default,
)
from specscope.sweep.synthetic import SYNTHETIC, Synthetic, parse_lengths, synthetic_config, synthetic_length_for

__all__ = [
    "SweepSpec",
    "SweepPlan",
    "Cell",
    "Launcher",
    "LaunchOptions",
    "RunningServer",
    "PresetLauncher",
    "ServersLauncher",
    "SweepResult",
    "SweepJob",
    "FinishedCell",
    "Recorder",
    "Advise",
    "Here",
    "OnRay",
    "Where",
    "claim",
    "execute",
    "ray_address",
    "run_sweep",
    "resolve",
    "as_plan",
    "describe",
    "parse_ints",
    "plan_cells",
    "run_dir",
    "finished_cells",
    "save_cell",
    "write_run",
    "run_hygiene",
    "launcher_for",
    "servers_spec",
    "synthetic_config",
    "synthetic_length_for",
    "Synthetic",
    "parse_lengths",
    "requests_of",
    "structured_default",
    "method_ks",
    "STRUCTURED",
    "SYNTHETIC",
]
