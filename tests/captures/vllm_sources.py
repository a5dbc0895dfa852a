"""Write ``vllm_speculative_config.json``: what each vLLM wheel's own source says it accepts, the facts
``specscope.engine.version_facts`` dates (``tests/unit/engine/test_version_facts.py`` checks the table against it).

    python tests/captures/vllm_sources.py vllm-0.24.0-*.whl ... > tests/captures/vllm_speculative_config.json

Each wheel's few source files are unzipped into a temporary folder and read as SpecScope reads an installed
vLLM (``specscope.engine.vllms``: ``ast``, nothing imported): the ``SpeculativeMethod`` names, the
``SpeculativeConfig`` fields with their literal values, and the markers below.
"""

from __future__ import annotations

import json
import re
import sys
import tempfile
import zipfile
from pathlib import Path

from specscope.engine import vllms

# name: (a file of the vllm package, the text whose presence is the fact)
MARKERS = {
    "bench_forward": ("benchmarks/forward/main.py", "def add_cli_args"),
    "v1_runner_removed": ("platforms/interface.py", "Model Runner V1 has been removed"),
    "suffix_needs_arctic_inference": ("config/speculative.py", "has_arctic_inference()"),
    "parallel_drafting_only_dflash_dspark": (
        "config/speculative.py",
        "parallel_drafting is only supported by the dflash and dspark",
    ),
}
FILES = ("config/speculative.py", *(path for path, _ in MARKERS.values()))


def read(wheel: Path) -> tuple[str, dict]:
    """(version, what the wheel's source says) of one vLLM wheel."""
    version = re.match(r"vllm-([0-9][^-]*)-", wheel.name).group(1)
    with tempfile.TemporaryDirectory() as folder, zipfile.ZipFile(wheel) as archive:
        for relative in FILES:
            if f"vllm/{relative}" in archive.namelist():
                archive.extract(f"vllm/{relative}", folder)
        root = Path(folder) / "vllm"
        keys = vllms.installed_keys(root)
        found = {
            name: (root / path).is_file() and text in (root / path).read_text()
            for name, (path, text) in MARKERS.items()
        }
        return version, {
            "methods": sorted(vllms.installed_methods(root) or ()),
            "keys": {k: list(v) if v else None for k, v in sorted((keys or {}).items())},
            "markers": found,
        }


if __name__ == "__main__":
    read_all = dict(read(Path(p)) for p in sys.argv[1:])
    print(json.dumps(dict(sorted(read_all.items(), key=lambda kv: tuple(map(int, kv[0].split("."))))), indent=1))
