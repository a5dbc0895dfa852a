"""The slowest tests of the JUnit reports tests/run.sh writes for its two streams, and their totals; with
``--waits``, how long each stream waited for the server room (tests/helpers/server_room.py):
python tests/helpers/slowest.py REPORT.xml ... [--top N] [--waits FILE]."""

from __future__ import annotations

import argparse
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("reports", nargs="+")
    parser.add_argument("--top", type=int, default=10)
    parser.add_argument("--waits", type=Path, help="the server room's record of waits (absent: none were long)")
    args = parser.parse_args()
    cases, totals = [], {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    for path in args.reports:
        for suite in ET.parse(path).getroot().iter("testsuite"):
            for key in totals:
                totals[key] += int(suite.get(key, 0))
            cases += [
                (float(case.get("time", 0)), f"{case.get('classname')}::{case.get('name')}")
                for case in suite.iter("testcase")
            ]
    print(f"slowest {args.top} tests (setup, call and teardown together):")
    for seconds, name in sorted(cases, reverse=True)[: args.top]:
        print(f"{seconds:8.1f}s  {name}")
    print("tests: {tests}, failures: {failures}, errors: {errors}, skipped: {skipped}".format(**totals))
    if args.waits:
        print(waits(args.waits))


def waits(path: Path) -> str:
    """'waited for the server room: vllm 12 s (2 waits, longest 9 s: NAME); rest 0 s', from its record."""
    by_stream: dict[str, list[tuple[float, str]]] = defaultdict(list)
    for line in path.read_text().splitlines() if path.exists() else []:
        stream, seconds, who = (line.split("\t") + ["", ""])[:3]
        by_stream[stream].append((float(seconds), who))
    if not by_stream:
        return "waited for the server room: never a second or more"
    parts = []
    for stream, found in sorted(by_stream.items()):
        longest, who = max(found)
        count = f"{len(found)} wait" + ("" if len(found) == 1 else "s")
        parts.append(f"{stream} {sum(s for s, _ in found):.0f} s ({count}, longest {longest:.0f} s: {who})")
    return "waited for the server room: " + "; ".join(parts)


if __name__ == "__main__":
    main()
