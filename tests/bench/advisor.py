"""The deploy answer on data it did not fit: each family fitted on the three smallest K of every group,
judged on all the K measured there.

Usage: python tests/bench/advisor.py [PARQUET_OR_JSON ...]

Reads every result the store holds (SpecScope's bundled rows) plus the files given (default: Ruiz's
published Parquet in ../shared/data, imported into a throwaway folder), fits each family with
``train_smallest=3`` (a group's other K never enter any fit), and asks ``deploy.answer`` which K to
deploy at each measured concurrency, as every page does. Prints
1. per group (family x concurrency) with 4 or more measured K: the answer's K, its measured speedup,
   the best measured K and speedup, whether the answer is within 3% of the best, where the answer's K came
   from (measured, or predicted beyond the fit's error), and the relative error of the prediction at each
   K the fit never saw;
2. the scatter floor: the same model fitted on every K, in-sample;
3. per family: the schedule the held-out answer advises, judged at every measured concurrency.
Last lines: ``advisor groups=<n> within_3pct=<m> share=<m/n> median_err=<e>`` and
``schedule groups=<n> within_3pct=<m> share=<m/n>``. Groups of 3 K or fewer hold no K the fit did not
see, so they are not counted.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import _on_path  # noqa: F401 - this checkout's app/ and tests/ on sys.path
import numpy as np

from helpers.paths import SHARED_DATA
from specscope import settings
from specscope.advice import deploy, fitting
from specscope.results import importers
from specscope.results.store import Store

DEFAULT = [SHARED_DATA / "tomasruizt_vllm-scripts_full-bench-data_d94d714.parquet"]
HELD_FROM = 4  # a group needs more K than the 3 it is fitted on


def _frame(paths: list[Path]):
    with tempfile.TemporaryDirectory() as tmp:
        for path in paths:
            importers.import_file(path, directory=Path(tmp))
        return Store(result_dirs=[settings.bundled_data_dir() / "results", Path(tmp)], request_dirs=[]).speedup()


def _name(keys: dict) -> str:
    return (
        f"{keys['model'][-30:]:<30} {keys['method']:<11} {(keys['draft_model'] or '-')[-30:]:<30} "
        f"{(keys['hardware'] or '-')[:12]:<12}"
    )


def main(paths: list[Path]) -> int:
    frame = _frame(paths)
    fits = fitting.fit_families(frame, train_smallest=3)
    errors, within, groups = [], 0, 0
    print(
        f"{'model':<30} {'method':<11} {'draft':<30} {'hardware':<12} {'conc':>4} {'K*':>3} {'S(K*)':>6} "
        f"{'Kbest':>5} {'Sbest':>6} {'ok':>3} {'from':<9} held-out K: rel err %"
    )
    for fit in fits:
        measured_ks = fit.rows.groupby("concurrency")["k"].nunique()
        asked = [float(c) for c, n in measured_ks.items() if n >= HELD_FROM]
        if not asked:
            continue
        found = deploy.answer(
            fit, concurrencies=asked, ks=sorted(int(k) for k in fit.rows["k"].unique()), max_batch=int(max(asked))
        )
        for choice in found.choices:
            g = fit.rows[fit.rows["concurrency"] == choice.concurrency]
            measured = g.groupby("k")["speedup"].mean().to_dict()
            best_k = max(measured, key=measured.get)
            got = measured.get(choice.k, 1.0) if choice.k else 1.0
            ok = got >= 0.97 * max(1.0, measured[best_k])
            within += ok
            groups += 1
            held = g[~g["train"]]
            errs = [(int(r.k), fit.predict(int(r.k), choice.concurrency) / r.speedup - 1.0) for r in held.itertuples()]
            errors += [abs(e) for _, e in errs]
            print(
                f"{_name(fit.keys)} {choice.concurrency:>4.0f} {choice.k:>3} {got:>6.3f} {best_k:>5} "
                f"{measured[best_k]:>6.3f} {'yes' if ok else 'NO':>3} {choice.source:<9} "
                + " ".join(f"K{k}:{e * 100:+.1f}" for k, e in errs)
            )
    in_sample = [
        abs(fit.predict(int(r.k), float(r.concurrency)) / r.speedup - 1.0)
        for fit in fitting.fit_families(frame)
        for r in fit.rows.itertuples()
    ]
    print(
        f"\nscatter floor: the same model fitted on every K (in-sample) leaves "
        f"median_err={np.median(in_sample):.4f} over {len(in_sample)} SD cells"
    )
    median = float(np.median(errors)) if errors else float("nan")
    print(f"advisor groups={groups} within_3pct={within} share={within / max(groups, 1):.3f} median_err={median:.4f}")
    print_schedules(fits)
    return 0


def print_schedules(fits: list[fitting.FamilyFit]) -> None:
    """Each family's held-out schedule against the best measured K at each of its concurrencies."""
    judged = within = 0
    print(f"\n{'model':<30} {'method':<11} {'draft':<30} {'hardware':<12} schedule (batch sizes:K)  misses")
    for fit in fits:
        if fit.rows.groupby("concurrency")["k"].nunique().max() < HELD_FROM:
            continue
        advised = deploy.answer(fit, max_batch=int(fit.rows["concurrency"].max())).k_schedule
        misses = []
        for conc, g in fit.rows.groupby("concurrency"):
            measured = g.groupby("k")["speedup"].mean().to_dict()
            k = advised.k_at(int(conc))
            got = 1.0 if k == 0 else measured.get(k)
            if got is None:
                continue  # that K was not measured at this concurrency
            best = max(1.0, max(measured.values()))
            judged += 1
            if got >= 0.97 * best:
                within += 1
            else:
                misses.append(f"c{int(conc)}:K{k} {got:.2f}<{best:.2f}")
        print(f"{_name(fit.keys)} {advised.text():<24} {' '.join(misses) or '-'}")
    print(f"schedule groups={judged} within_3pct={within} share={within / max(judged, 1):.3f}")


if __name__ == "__main__":
    sys.exit(main([Path(p) for p in sys.argv[1:]] or DEFAULT))
