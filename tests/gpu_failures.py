"""pytest plugin of ``gpu_check.py``'s suite phase: each failing test's report is appended to the
file named by ``GPU_CHECK_FAILURES`` as soon as the test fails.

pytest prints tracebacks only at the end of a session, so a run stopped by its time cap would lose
them all. Under pytest-xdist the controller writes (workers skip: the controller receives every
report). Load it with ``-p tests.gpu_failures`` (the repository root on ``PYTHONPATH``).
"""

from __future__ import annotations

import os

_path: str | None = None


def pytest_configure(config) -> None:
    global _path
    if not hasattr(config, "workerinput"):  # the controller, or a run without xdist
        _path = os.environ.get("GPU_CHECK_FAILURES") or None


def pytest_runtest_logreport(report) -> None:
    if _path and report.failed:
        with open(_path, "a", encoding="utf-8") as f:
            f.write(f"===== {report.nodeid} ({report.when})\n{report.longreprtext}\n\n")
