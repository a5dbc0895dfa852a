"""The slowest tests of the JUnit reports tests/run.sh writes for its two streams, and their totals:
python tests/slowest.py REPORT.xml ... [--top N]."""

from __future__ import annotations

import argparse
import xml.etree.ElementTree as ET


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("reports", nargs="+")
    parser.add_argument("--top", type=int, default=10)
    args = parser.parse_args()
    cases, totals = [], {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    for path in args.reports:
        for suite in ET.parse(path).getroot().iter("testsuite"):
            for key in totals:
                totals[key] += int(suite.get(key, 0))
            cases += [(float(case.get("time", 0)), f"{case.get('classname')}::{case.get('name')}")
                      for case in suite.iter("testcase")]
    print(f"slowest {args.top} tests (setup, call and teardown together):")
    for seconds, name in sorted(cases, reverse=True)[:args.top]:
        print(f"{seconds:8.1f}s  {name}")
    print("tests: {tests}, failures: {failures}, errors: {errors}, skipped: {skipped}".format(**totals))


if __name__ == "__main__":
    main()
