"""Advisor check on real results: fit on the three smallest K of each group, judge on the rest.

Usage: python tests/bench/advisor.py [RUIZ_PARQUET]

Imports the Ruiz Parquet (default /work/shared/data/...) into a throwaway folder, fits each
family with ``train_smallest=3`` (a group's held-out K never enter any fit), then prints
1. per group (model, method, draft, concurrency): the advisor's K among the measured K, its
   measured speedup against the best measured one, and the relative error of the predicted
   speedup at each held-out K;
2. per family: predicted vs measured concurrency above which speedup < 1.
3. the scatter floor: the median error of the same model fitted on every K, in-sample.
4. per family: the K schedule advised from the same held-out fits (``specscope.schedule``),
   judged at every measured concurrency against the best measured K there (K=0 reads 1.0x).
Last lines: ``advisor groups=<n> within_3pct=<m> share=<m/n> median_err=<e>`` and
``schedule groups=<n> within_3pct=<m> share=<m/n>``.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import numpy as np

from specscope import advisor, importers, schedule
from specscope.store import Store

DEFAULT = Path("/work/shared/data/tomasruizt_vllm-scripts_full-bench-data_d94d714.parquet")


def main(path: Path) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        importers.import_file(path, directory=Path(tmp))
        frame = Store(result_dirs=[Path(tmp)], request_dirs=[]).speedup()
    fits = advisor.fit_families(frame, train_smallest=3)
    errors, within, groups = [], 0, 0
    print(f"{'model':<34} {'method':<11} {'draft':<38} {'conc':>4} {'K*':>3} {'S(K*)':>6} "
          f"{'Kbest':>5} {'Sbest':>6} {'ok':>3}  held-out K: rel err %")
    crossings = []
    for fit in fits:
        rows = fit.rows
        for conc, g in rows.groupby("concurrency"):
            measured = dict(zip(g["k"].astype(int), g["speedup"]))
            advice = advisor.advise(fit, float(conc), ks=list(measured))
            best_k = max(measured, key=measured.get)
            ok = measured[advice.k] >= 0.97 * measured[best_k]
            within += ok
            groups += 1
            held = g[~g["train"]]
            errs = [(int(r.k), fit.predict(int(r.k), float(conc)) / r.speedup - 1.0)
                    for r in held.itertuples()]
            errors += [abs(e) for _, e in errs]
            print(f"{fit.keys['model']:<34} {fit.keys['method']:<11} "
                  f"{fit.keys['draft_model'] or '-':<38} {int(conc):>4} {advice.k:>3} "
                  f"{measured[advice.k]:>6.3f} {best_k:>5} {measured[best_k]:>6.3f} "
                  f"{'yes' if ok else 'NO':>3}  " + " ".join(f"K{k}:{e * 100:+.1f}" for k, e in errs))
        ks = sorted(int(k) for k in rows["k"].unique())
        crossings.append((fit, advisor.predicted_crossover(fit, ks), advisor.measured_crossover(rows),
                          advisor.predicted_crossover(fit, ks, upto=4 * rows["concurrency"].max())))
    print()
    print(f"{'model':<34} {'method':<11} {'draft':<38} {'pred crossover':>14} {'measured':>9} "
          f"{'pred, extrapolated to 4x max conc':>34}")
    for fit, pred, meas, beyond in crossings:
        show = [f"{v:.0f}" if v is not None else "none" for v in (pred, meas, beyond)]
        print(f"{fit.keys['model']:<34} {fit.keys['method']:<11} {fit.keys['draft_model'] or '-':<38} "
              f"{show[0]:>14} {show[1]:>9} {show[2]:>34}")
    in_sample = [abs(fit.predict(int(r.k), float(r.concurrency)) / r.speedup - 1.0)
                 for fit in advisor.fit_families(frame) for r in fit.rows.itertuples()]
    print(f"\nscatter floor: the same model fitted on every K (in-sample) leaves "
          f"median_err={np.median(in_sample):.4f} over {len(in_sample)} SD cells")
    median = float(np.median(errors)) if errors else float("nan")
    print(f"advisor groups={groups} within_3pct={within} share={within / groups:.3f} "
          f"median_err={median:.4f}")
    print_schedules(fits)
    return 0


def print_schedules(fits: list[advisor.FamilyFit]) -> None:
    """Each family's schedule from its held-out fit vs the best measured K at each concurrency."""
    judged = within = 0
    print(f"\n{'model':<34} {'method':<11} {'draft':<38} schedule (batch sizes:K)  misses")
    for fit in fits:
        advised, _ = schedule.advise_schedule(fit, max_batch=int(fit.rows["concurrency"].max()))
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
        print(f"{fit.keys['model']:<34} {fit.keys['method']:<11} {fit.keys['draft_model'] or '-':<38} "
              f"{advised.text():<24} {' '.join(misses) or '-'}")
    print(f"schedule groups={judged} within_3pct={within} share={within / judged:.3f}")


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT))
