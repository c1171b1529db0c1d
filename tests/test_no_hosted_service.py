"""The repository speaks to a user with their own laptop, GPU machine or cluster.

No tracked file may describe the remote-machine service some of this code was first measured
through: its call syntax (``run(command=…, carry=[…], timeout_s=…)``, ``files_fetch``,
``give_back``), its time budget and lease, its limit on returned files, or absolute paths of
the machine the docs were written on. Each pattern below is one of those phrasings, chosen so
that the ordinary uses of the same words (a ``lax.scan`` carry, a CPU budget of an experiment,
"the device" of JAX) do not match.
"""

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PATTERNS = {
    "call syntax": r"\b(?:files_fetch|files_at|give_back|can_start_another|not_drawn|budget_left)\b",
    "call arguments": r"\btimeout_s\s*=|\bcarry\s*=\s*\[",
    "carried files": r"\bcarr(?:y|ied)\b[^\n]{0,40}(?:wheels?|\.gpu_\w+)|"
    r"(?:wheels?|\.gpu_\w+)[^\n]{0,40}\bcarr(?:y|ied)\b",
    "time budget": r"\bdevice time\b|\blease\b|minutes of device|\bdevice tool\b",
    "returned files": r"\b\d+ files\b[^\n]{0,30}\b(?:limit|most|returns?)\b|"
    r"\breturns? at most \d+ files\b",
    "machine paths": r"/work/|\.library/|KINDS\.md",
    "hosted service": r"\bhosted\b|\blent\b|\bprepare[ds]? (?:it )?here\b|\bhere, once\b",
}
# This file states the patterns it looks for.
ALLOWED = {"tests/test_no_hosted_service.py"}
TEXT_SUFFIXES = {".py", ".md", ".sh", ".toml", ".txt", ".cfg", ".ini", ".yml", ".yaml", ""}


def _tracked_text_files() -> list[Path]:
    names = subprocess.run(
        ["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split("\n")
    return [
        ROOT / n
        for n in names
        if n and n not in ALLOWED and Path(n).suffix in TEXT_SUFFIXES and (ROOT / n).is_file()
    ]


def test_no_tracked_file_speaks_of_a_hosted_machine_service():
    files = _tracked_text_files()
    assert any(f.name == "gpu.md" for f in files)
    anything = re.compile("|".join(f"(?:{p})" for p in PATTERNS.values()), flags=re.IGNORECASE)
    hits = []
    for path in files:
        try:
            text = path.read_text()
        except UnicodeDecodeError:
            continue
        if not anything.search(text):
            continue
        for line_no, line in enumerate(text.splitlines(), 1):
            for what, pattern in PATTERNS.items():
                if re.search(pattern, line, flags=re.IGNORECASE):
                    hits.append(f"{path.relative_to(ROOT)}:{line_no}: {what}: {line.strip()[:100]}")
    assert not hits, "\n".join(hits)


def test_the_patterns_catch_the_service_and_spare_ordinary_words():
    def caught(text: str) -> bool:
        return any(re.search(p, text, flags=re.IGNORECASE) for p in PATTERNS.values())

    for service in (
        'run(command="bash x.sh", carry=[".gpu_wheels"], timeout_s=600)',
        "Call give_back as soon as you will not rerun",
        "the device returns at most 8 files",
        "wheels and data to carry",
        "the 15-minute lease with the start",
        "PYTHON=/work/venv/bin/python",
        "prepare here, once per checkout",
    ):
        assert caught(service), service
    for ordinary in (
        "def one_step(carry, _):",
        "over the 10-minute budget of the small scale",
        "the reduction runs on the device and one bool comes back",
        "Checkpoints carry a SHA-256 of their arrays",
        "a fixed step budget cannot separate it",
        "the equivalent run on 8 GPUs",
    ):
        assert not caught(ordinary), ordinary
