"""The README's notebook command, exactly as written, executes every notebook top to bottom."""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
# The command of the README's notebooks section (its one bash block).
COMMAND = re.search(r"### notebooks\n.*?```bash\n(.*?)\n```", README, re.S).group(1).strip()


def test_the_readme_notebook_command_runs_every_notebook(tmp_path):
    """`jupytext --to ipynb` then `jupyter execute`, the README's recipe, on a copy of notebooks/
    (the tools of this environment first on the PATH; LRRICH_NOTEBOOK_SMOKE shortens the runs)."""
    for tool in ("jupytext", "jupyter"):
        if shutil.which(tool, path=str(Path(sys.executable).parent)) is None:
            pytest.skip(f"{tool} is not installed: pip install -e '.[dev]'")
    shutil.copytree(ROOT / "notebooks", tmp_path / "notebooks")
    env = {
        **os.environ,
        "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ["PATH"]]),
        "PYTHONPATH": str(ROOT),
        "MPLBACKEND": "Agg",
        "LRRICH_NOTEBOOK_SMOKE": "1",
    }
    proc = subprocess.run(
        ["bash", "-c", COMMAND], cwd=tmp_path, env=env, capture_output=True, text=True,
        timeout=1200,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    import nbformat

    notebooks = sorted((tmp_path / "notebooks").glob("*.ipynb"))
    assert [p.stem for p in notebooks] == sorted(p.stem for p in (ROOT / "notebooks").glob("*.py"))
    for path in notebooks:
        nb = nbformat.read(path, as_version=4)
        outputs = [o for c in nb.cells for o in c.get("outputs", [])]
        assert outputs, f"{path.name} kept no outputs"
        assert not [o for o in outputs if o.get("output_type") == "error"], path.name
    # Notebook 02's text says the rich network has the smaller effective dimension: it prints so.
    nb = nbformat.read(tmp_path / "notebooks" / "02_dlr_feature_decomposition.ipynb", as_version=4)
    printed = "".join(o.get("text", "") for c in nb.cells for o in c.get("outputs", []))
    assert re.search(r"C = 10 classes; D_eff\(ρ\): rich [\d.]+ < lazy [\d.]+", printed), printed
