"""`.dockerignore` keeps out of the image everything `.gitignore` keeps out of the repository, and models, venvs,
SpecScope homes and tokens wherever they lie, while every tracked file still reaches the build.

.gitignore's side is read by git itself (``git check-ignore``); .dockerignore's by the matching rules of
Docker's and podman's builders (moby's patternmatcher, re-stated in ``_excluded``: a pattern matches from the
context's root, ``*`` stays within a folder, ``**`` spans folders, a path is excluded when it or a folder above
it matches, the last matching line wins and ``!`` re-includes). Those rules were checked against podman 4.3's
real build context once (the files a ``COPY . .`` of this repository's context brings, README.md).
"""

from __future__ import annotations

import re
import subprocess

import pytest

from helpers.paths import REPO

NESTED = "app/specscope/deep"  # where an unanchored .gitignore pattern must be matched too
# what no image may carry, beyond .gitignore: models, venvs, homes, tokens
MUST_STAY_OUT = [
    ".venv-vllm/0.30.0/bin/python",
    "tools/venv/bin/python",
    "sub/.venv/bin/python",
    ".specscope/operator-token",
    "operator-token",
    "data/home-alice/operator-token",
    "home-ci/servers/cpu-smollm2-none.json",
    "models/SmolLM2/model.safetensors",
    "data/draft.gguf",
    "data/x/pytorch_model.bin",
    "data/x/weights.pt",
    "data/x/weights.pth",
    "data/x/model.onnx",
    "data/x/model.ckpt",
    "app/models/SmolLM2/config.json",
    ".cache/specscope/models/x.json",
    ".git/HEAD",
]


def _patterns(text: str) -> list[tuple[bool, re.Pattern[str]]]:
    """(is an exception, regex) for each line of a .dockerignore, as moby's patternmatcher compiles it."""
    found = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        negated = line.startswith("!")
        pattern = re.sub(r"/+", "/", line.lstrip("!").strip()).strip("/") or "."
        regex, i = "^", 0
        while i < len(pattern):
            if pattern.startswith("**", i):
                i += 2 + (pattern[i + 2 : i + 3] == "/")
                regex += ".*" if i >= len(pattern) else "(.*/)?"
                continue
            char = pattern[i]
            regex += "[^/]*" if char == "*" else "[^/]" if char == "?" else re.escape(char)
            i += 1
        found.append((negated, re.compile(regex + "$")))
    return found


def _excluded(relative: str, patterns: list[tuple[bool, re.Pattern[str]]]) -> bool:
    """Whether a path of the context is left out: the last pattern that matches it or a folder above it decides."""
    parts = relative.split("/")
    candidates = ["/".join(parts[:n]) for n in range(1, len(parts) + 1)]
    excluded = False
    for negated, regex in patterns:
        if any(regex.match(candidate) for candidate in candidates):
            excluded = not negated
    return excluded


def _samples(pattern: str) -> list[str]:
    """Paths a .gitignore line ignores: at the root and, unless anchored, in a nested folder; a folder pattern
    through a file inside it."""
    body = pattern.rstrip("/").replace("*", "x")
    inside = "/inner.txt" if pattern.endswith("/") else ""
    anchored = "/" in pattern.rstrip("/")
    body = body.lstrip("/")
    return [body + inside] + ([] if anchored else [f"{NESTED}/{body}{inside}"])


def _gitignored(paths: list[str]) -> set[str]:
    result = subprocess.run(
        ["git", "check-ignore", "--no-index", *paths], cwd=REPO, capture_output=True, text=True, check=False
    )
    return set(result.stdout.split())


@pytest.fixture(scope="module")
def docker_patterns():
    return _patterns((REPO / ".dockerignore").read_text())


def test_what_git_ignores_stays_out_of_the_image(docker_patterns):
    lines = [
        line.strip()
        for line in (REPO / ".gitignore").read_text().splitlines()
        if line.strip() and not line.startswith(("#", "!"))
    ]
    samples = [path for line in lines for path in _samples(line)]
    assert _gitignored(samples) == set(samples)  # the samples are what git ignores
    assert [path for path in samples if not _excluded(path, docker_patterns)] == []


def test_models_venvs_homes_and_tokens_stay_out_of_the_image(docker_patterns):
    assert [path for path in MUST_STAY_OUT if not _excluded(path, docker_patterns)] == []


def test_every_tracked_file_reaches_the_build(docker_patterns):
    tracked = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True).stdout.split()
    assert len(tracked) > 100
    build_files = {"Dockerfile", ".dockerignore"}  # read by the builder itself, not copied
    assert [path for path in tracked if path not in build_files and _excluded(path, docker_patterns)] == []


def test_the_matcher_follows_dockers_rules():
    """The rules ``_excluded`` states, on patterns whose effect Docker's documentation gives."""
    rules = _patterns("**/*.go\n!important.go\ntemp?\n/build\ndocs/*.md\n")
    assert _excluded("a/b/c.go", rules) and not _excluded("important.go", rules)
    assert _excluded("tempa", rules) and not _excluded("tempab", rules)
    assert _excluded("build/lib/x.py", rules) and not _excluded("app/build/x.py", rules)
    assert _excluded("docs/a.md", rules) and not _excluded("docs/sub/a.md", rules)
