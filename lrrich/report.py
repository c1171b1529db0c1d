"""Render a run directory (config.json, results.json, *.png) as report.md and report.html."""

from __future__ import annotations

import json
from pathlib import Path

from lrrich import io
from lrrich.registry import discover


def _fmt(v) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    if isinstance(v, dict | list):
        s = json.dumps(v)
        return s if len(s) < 80 else s[:77] + "..."
    return str(v)


def _cell(v) -> str:
    return _fmt(v).replace("|", "/").replace("\n", " ")


def _paper_table(paper: dict, summary: dict) -> list[str]:
    rows = ["| quantity | paper | measured |", "| --- | --- | --- |"]
    for key, pv in paper.items():
        rows.append(f"| {key} | {_fmt(pv)} | {_fmt(summary.get(key, '—'))} |")
    return rows


COMPARISON_KEYS = ("quantity", "paper", "measured", "dataset", "scale", "verdict", "note")
"""The keys every comparison row has had from the start (old ``results.json`` files)."""

_TABLE_COLUMNS = ("quantity", "paper", "measured", "n", "random-feature D_LR", "verdict")
_VERDICT_ORDER = ("reproduced", "direction reproduced", "inconclusive", "not reproduced")


def _seeds_text(values) -> str:
    """The per-seed values of a row: ``'0.08, 0.09, 0.08'``, or ``'rich: …; lazy: …'``."""

    def one(vs) -> str:
        return ", ".join("n/a" if v is None else _fmt(v) for v in vs)

    if isinstance(values, dict):
        return "; ".join(f"{k}: {one(v)}" for k, v in values.items())
    return one(values) if isinstance(values, list) else "—"


def _reference_text(ref) -> str:
    """The random-feature D_LR of a row with the n, p and rank it was taken at."""
    if not ref:
        return "—"
    rank = "C" if ref.get("rank_source") == "C" else "measured rank"
    return f"{ref['dlr']:.3f} (n {ref['n']}, p {ref['p']}, r {ref['rank']} = {rank})"


def _comparison_table(rows: list[dict]) -> list[str]:
    """``results["comparison"]`` rows as a markdown table (one paper quantity per row: paper and
    measured value, number of seeds n, the random-feature D_LR at the run's n, p and rank for a
    D_LR row, verdict), then each row's test: the paper's criterion, the tolerance or
    statistical test, the per-seed values, dataset, scale and note. Rows of older runs without
    these keys show "—"."""
    out = ["| " + " | ".join(_TABLE_COLUMNS) + " |", "|" + " --- |" * len(_TABLE_COLUMNS)]
    for r in rows:
        cells = (
            r.get("quantity", "—"),
            r.get("paper", "—"),
            r.get("measured", "—"),
            r.get("n_seeds", "—"),
            _reference_text(r.get("reference")),
            r.get("verdict", "—"),
        )
        out.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    out += ["", "How each row is judged:", ""]
    for r in rows:
        n = r.get("n_seeds")
        seeds = "—" if n is None else f"n = {n} seed{'s' if n != 1 else ''}"
        quantity = str(r.get("quantity", "?")).replace("\n", " ")
        out.append(f"- **{quantity}** ({r.get('verdict', '—')})")
        out.append(f"  - criterion: {r.get('criterion') or '—'}")
        out.append(f"  - tolerance / test: {r.get('tolerance') or '—'}")
        out.append(f"  - per-seed values ({seeds}): {_seeds_text(r.get('values'))}")
        if r.get("reference"):
            out.append(
                "  - random-feature reference (D_LR of isotropic random features at the same "
                f"n, p, rank; `metrics.random_feature_dlr`): {_reference_text(r['reference'])}"
            )
        out.append(f"  - dataset: {r.get('dataset', '—')}; scale: {r.get('scale', '—')}")
        if r.get("note"):
            out.append(f"  - note: {r['note']}")
    return out


def _verdict_counts(rows: list[dict]) -> str:
    """``'1 reproduced, 2 direction reproduced, 1 not reproduced'`` in a fixed order."""
    counts = {v: sum(r.get("verdict") == v for r in rows) for v in _VERDICT_ORDER}
    other = len(rows) - sum(counts.values())
    parts = [f"{k} {v}" for v, k in counts.items() if k] + ([f"{other} other"] if other else [])
    return ", ".join(parts)


def _disagreements(rows: list[dict], experiment: str | None = None) -> list[str]:
    """The comparison rows whose verdict is not "reproduced", each with its verdict and note,
    under a heading that counts the rows by verdict, and a pointer to the findings file where
    the investigations of the experiment's disagreements live (``docs/findings/<name>.md``)."""
    off = [r for r in rows if r.get("verdict") != "reproduced"]
    if not off:
        return []
    lines = [
        "## Disagreements",
        "",
        f"Of {len(rows)} quantities: {_verdict_counts(rows)}. The {len(off)} not judged "
        "reproduced:",
        "",
    ]
    for r in off:
        note = r.get("reason") or r.get("note") or "no note"
        lines.append(f"- **{_cell(r.get('quantity', '?'))}** ({r.get('verdict')}): {note}")
    findings = f"docs/findings/{experiment.replace('-', '_')}.md" if experiment else None
    if findings and not (Path(__file__).resolve().parents[1] / findings).is_file():
        findings = None
    lines += [
        "",
        "What was investigated and why the values differ: "
        + (f"`{findings}` in the repository" if findings else "the experiment's findings file")
        + "; the protocol is under *About this experiment* below.",
        "",
    ]
    return lines


def _about(exp) -> list[str]:
    """The experiment module's docstring: protocol, deviations from the paper, the reference
    measurements and the investigations of its disagreements."""
    import importlib

    if exp is None or not exp.module:
        return []
    try:
        doc = importlib.import_module(exp.module).__doc__
    except ImportError:
        return []
    if not doc or not doc.strip():
        return []
    text = doc.strip("\n").replace("```", "'''")  # a fence inside would end the block
    return ["## About this experiment", "", "```text", text, "```", ""]


def _dataset_warning(exp, cfg: dict, rows: list[dict]) -> list[str]:
    """A note when the run's dataset differs from the one of the experiment's paper scale.

    The dataset the run used is the one its comparison rows name (``'<name> (n train / n
    test)'``), which differs from the config's when a missing dataset fell back to mnist5k.
    """
    paper_cfg = exp.scales.get("paper") if exp is not None else None
    used = {str(r.get("dataset", "")).split(" ")[0] for r in rows} - {""}
    ran = used.pop() if len(used) == 1 else cfg.get("config", {}).get("dataset")
    wanted = getattr(paper_cfg, "dataset", None)
    if ran is None or wanted is None or ran == wanted:
        return []
    return [
        f"**Dataset differs from the paper's:** this run used `{ran}`, the paper `{wanted}` "
        "(`--scale paper`); compare directions, not values.",
        "",
    ]


def _provenance(cfg: dict) -> list[str]:
    prov = cfg.get("provenance")
    if not prov:
        return []
    dirty = {True: " (uncommitted changes)", False: "", None: ""}[prov.get("git_dirty")]
    packages = ", ".join(f"{k} {v}" for k, v in prov.get("packages", {}).items() if v)
    return [
        "## Provenance",
        "",
        f"- command: `{prov.get('command', '')}`",
        f"- git commit: `{prov.get('git_commit')}`{dirty}",
        f"- packages: {packages}",
        f"- host: {prov.get('host', '')}, started {prov.get('started', '')}",
        "",
    ]


def render_markdown(run_dir: str | Path) -> str:
    """The markdown text of the report for ``run_dir``."""
    run_dir = Path(run_dir)
    cfg = io.read_json(run_dir / "config.json")
    res = io.read_json(run_dir / "results.json") if (run_dir / "results.json").exists() else {}
    exp = discover().get(cfg.get("experiment", ""))
    lines = [f"# {cfg.get('experiment', run_dir.name)}", ""]
    if exp is not None:
        lines += [exp.description, ""]
    summary = res.get("summary", {})
    status = res.get("status", "finished" if res else "unfinished")
    if status != "finished":
        lines += [f"**Status: {status}.** {res.get('message') or ''}".strip(), ""]
    if res.get("plot_error"):
        lines += [
            f"**Figures failed:** {res['plot_error']} (`lrrich report --replot` retries).",
            "",
        ]
    warning = _dataset_warning(exp, cfg, res.get("comparison") or [])
    rows = res.get("comparison") or []
    if rows and all("reason" in r for r in rows):  # judged by lrrich.claims
        from lrrich.table import report_lines

        lines += ["## Paper vs measured", "", *warning, *report_lines(rows), ""]
        lines += _disagreements(rows, cfg.get("experiment"))
    elif rows:  # rows of runs recorded before the claims engine
        lines += ["## Paper vs measured", "", *warning, *_comparison_table(rows), ""]
        lines += _disagreements(rows, cfg.get("experiment"))
    elif exp is not None and exp.paper:
        lines += ["## Paper vs measured", "", *warning, *_paper_table(exp.paper, summary), ""]
    if summary:
        lines += ["## Summary", "", "| quantity | value |", "| --- | --- |"]
        lines += [f"| {k} | {_fmt(v)} |" for k, v in summary.items()]
        lines.append("")
    figs = sorted(run_dir.glob("*.png"))
    if figs:
        lines += ["## Figures", ""]
        lines += [f"![{f.stem}]({f.name})" for f in figs]
        lines.append("")
    lines += _about(exp)
    lines += [
        "## Config",
        "",
        f"scale: `{cfg.get('scale')}`",
        "",
        "| key | value |",
        "| --- | --- |",
    ]
    lines += [f"| {k} | {_fmt(v)} |" for k, v in cfg.get("config", {}).items()]
    lines.append("")
    timing = res.get("timing", {})
    if timing:
        lines += ["## Timing", "", "| phase | seconds |", "| --- | --- |"]
        lines += [f"| {k} | {_fmt(v)} |" for k, v in timing.items()]
        lines.append("")
    lines += _provenance(cfg)
    env = res.get("environment")
    if env:
        lines += ["## Environment", "", "```", json.dumps(env, indent=1), "```", ""]
    return "\n".join(lines)


def _markdown_to_html(md: str) -> str:
    """report.md as a standalone HTML page (CommonMark with GitHub tables, by markdown-it-py)."""
    from markdown_it import MarkdownIt

    body = MarkdownIt("commonmark", {"html": False}).enable("table").render(md)
    style = "table{border-collapse:collapse}td,th{border:1px solid #999;padding:3px}"
    return f"<!doctype html><meta charset=utf-8><style>{style}</style><body>\n{body}</body>\n"


def redraw_figures(run_dir: str | Path) -> list[Path]:
    """Redraw the figures of a finished run from its ``results.json`` alone (no recomputation).

    Args:
      run_dir: a run folder with ``config.json`` and ``results.json``.

    Returns:
      the figure paths the experiment's ``plot`` wrote (empty when it has none or the run did
      not finish).

    Raises:
      FileNotFoundError: ``run_dir`` has no ``results.json`` (the run never finished).
      ValueError: the folder's experiment is not registered.
    """
    run_dir = Path(run_dir)
    cfg = io.read_json(run_dir / "config.json")
    results_path = run_dir / "results.json"
    if not results_path.exists():
        raise FileNotFoundError(f"{results_path} does not exist: the run never finished")
    exp = discover().get(cfg.get("experiment", ""))
    if exp is None:
        raise ValueError(
            f"{run_dir} holds a run of {cfg.get('experiment')!r}, which is not registered; "
            "register its module first"
        )
    results = io.read_json(results_path)
    if exp.plot is None or results.get("status", "finished") != "finished":
        return []
    paths = list(exp.plot(results, run_dir) or [])
    if results.pop("plot_error", None) is not None:
        io.write_json(results_path, results)
    return paths


def write_report(run_dir: str | Path, *, replot: bool = False) -> Path:
    """Write ``report.md`` and ``report.html`` into ``run_dir``; return the markdown path.

    Args:
      run_dir: a run folder.
      replot: first redraw the figures from ``results.json`` (:func:`redraw_figures`).
    """
    run_dir = Path(run_dir)
    if replot:
        redraw_figures(run_dir)
    md = render_markdown(run_dir)
    io.atomic_write_bytes(run_dir / "report.html", _markdown_to_html(md).encode())
    return io.atomic_write_bytes(run_dir / "report.md", md.encode())
