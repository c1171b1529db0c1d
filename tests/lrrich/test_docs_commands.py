"""Every ``lrrich`` command in the README, docs/gpu.md and docs/cluster.md runs as written.

Commands are taken from the fenced code blocks (continuation lines joined, ``a && lrrich b``
split, comments dropped) and from inline code spans. ``run``, ``demo`` and ``sweep`` run with
``--dry-run`` (checked whole, nothing written); ``list`` and ``info`` run as they are; ``report``
runs on a run or sweep folder of the toy experiment made at the documented path; ``verify``
runs on one model and one case (its full run takes minutes). Each document's install lines must
name every extra its commands need, as their dry runs report them. Everything runs in this
process, in a temporary folder.
"""

import re
import shlex
from pathlib import Path

import pytest

from lrrich import cli
from lrrich.runner import run_experiment
from lrrich.sweep import run_sweep
from tests.lrrich import toy_experiment

_toy = toy_experiment.autouse_fixture()

ROOT = Path(__file__).resolve().parents[2]
DOCS = ("README.md", "docs/gpu.md", "docs/cluster.md")
# Inline spans that name a subcommand or a flag in prose rather than give a command to run; a
# span with "…" (a synopsis such as `lrrich sweep … --jobs 4`) is prose too.
REFERENCES = {
    "lrrich --quiet",
    "lrrich run",
    "lrrich sweep",
    "lrrich report",
    "lrrich sweep --vmap",
    "lrrich report RUN --replot",
    "lrrich record",
    "lrrich record RUN",
    "lrrich table [--check]",
}
# `lrrich verify` checks every closed form against the integrator (minutes); one model, one case.
VERIFY_TINY = ["--cases", "1", "--models", "linear_model"]


def _shell_blocks(text: str) -> list[str]:
    """The bodies of the fenced blocks marked bash / sh / console, or not marked."""
    blocks, body, lang = [], None, ""
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            if body is None:
                body, lang = [], line.strip().strip("`").strip()
            else:
                if lang in ("", "bash", "sh", "console"):
                    blocks.append("\n".join(body))
                body = None
        elif body is not None:
            body.append(line)
    return blocks


def _fenced_commands(text: str) -> list[str]:
    commands = []
    for block in _shell_blocks(text):
        for line in block.replace("\\\n", " ").splitlines():
            for part in line.split("&&"):
                part = part.split(" # ")[0].strip()
                part = re.sub(r"^(?:[A-Z_][A-Z0-9_]*=\S+\s+)+", "", part)  # VAR=value lrrich …
                if part.startswith("lrrich "):
                    commands.append(" ".join(part.split()))
    return commands


def _inline_commands(text: str) -> list[str]:
    spans = re.findall(r"(?<!`)`(lrrich [^`\n]+)`(?!`)", text)
    spans = [" ".join(s.split()) for s in spans]
    return [s for s in spans if s not in REFERENCES and "…" not in s]


def _commands() -> list[tuple[str, str]]:
    out = []
    for doc in DOCS:
        text = (ROOT / doc).read_text()
        found = _fenced_commands(text) + _inline_commands(text)
        out += [(doc, c) for c in dict.fromkeys(found)]
    return out


COMMANDS = _commands()


def _install_extras(text: str) -> set[str]:
    """Extras named by the document's ``pip install -e ".[a,b]"`` lines."""
    extras = set()
    for group in re.findall(r"pip install -e \"?'?\.\[([a-z0-9_,\- ]+)\]", text):
        extras |= {e.strip() for e in group.split(",")}
    return extras


def _toy_folder(path: Path) -> None:
    """A finished run or sweep folder of the toy experiment at ``path``."""
    if "sweep" in path.name:
        run_sweep("toy", {"scale": ["1", "2"]}, path, progress=False)
    else:
        run_experiment("toy", None, path)


def _argv(command: str, tmp_path: Path) -> list[str]:
    words = shlex.split(command)[1:]
    sub = words[0]
    if sub in ("run", "demo", "sweep"):
        return [*words, "--dry-run"]
    if sub == "report":
        _toy_folder(tmp_path / words[1])
        return words
    if sub == "verify":
        return [*words, *VERIFY_TINY]
    if sub in ("list", "info"):
        return words
    if sub == "table":  # --check reads the committed docs and records; nothing is rewritten
        return ["table", "--check"]
    if sub == "record":  # a finished run kept in a scratch records folder, not the repository's
        _toy_folder(tmp_path / words[1])
        return [*words, "--records", str(tmp_path / "records")]
    raise AssertionError(f"no way to check `{command}` quickly: add one to {__name__}")


def test_the_documents_give_commands():
    docs = {doc for doc, _ in COMMANDS}
    assert docs == set(DOCS)
    assert any("--scale paper" in c for _, c in COMMANDS)


@pytest.mark.parametrize(("doc", "command"), COMMANDS, ids=[f"{d}:{c}" for d, c in COMMANDS])
def test_documented_command_runs(doc, command, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    argv = _argv(command, tmp_path)
    assert cli.main([*argv, "--quiet"]) == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    if "--dry-run" in argv:
        assert "nothing was written (--dry-run)" in out
        written = [p for p in tmp_path.rglob("*")]
        assert written == [], f"--dry-run wrote {written}"
        needed = set(re.findall(r"^\s+(?:extras)?\s*\[([a-z0-9]+)\] for ", out, flags=re.M))
        named = _install_extras((ROOT / doc).read_text())
        assert needed <= named, f"{doc} runs `{command}` but never installs {needed - named}"


def test_dry_run_refuses_what_the_real_command_refuses(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert cli.main(["sweep", "toy", "--grid", "scale=1,,2", "--dry-run"]) == 2
    assert "--grid" in capsys.readouterr().err
    assert cli.main(["run", "toy", "--set", "seed=x", "--dry-run"]) == 2
    assert "--set seed" in capsys.readouterr().err
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "notes.txt").write_text("mine")
    assert cli.main(["sweep", "toy", "--grid", "scale=1,2", "--out", "busy", "--dry-run"]) == 2
    assert cli.main(["run", "toy", "--out", "busy", "--dry-run"]) == 2
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["busy", "notes.txt"]


def test_dry_run_prints_the_plan(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    argv = ["sweep", "toy", "--grid", "scale=1,2,3", "--seeds", "2", "--jobs", "2", "--dry-run"]
    assert cli.main(argv) == 0
    out = capsys.readouterr().out
    assert "points      6 (run folders); runs 6" in out
    assert "scale=3, seed=1" in out
    assert "2 processes on this machine" in out
    assert "dataset     toyset" in out
    assert not any(tmp_path.iterdir())
