"""End-to-end fixtures: real `sluice` and `airflow` processes, real spark-submit."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

BIN = Path(sys.executable).parent


def pytest_collection_modifyitems(items):
    for item in items:
        if "/e2e/" in str(item.fspath):
            item.add_marker(pytest.mark.e2e)


def sluice(*args: str, timeout: int = 600) -> subprocess.CompletedProcess:
    """Run the installed `sluice` command with the test's environment (lake and pipelines from `lake`)."""
    return subprocess.run([str(BIN / "sluice"), *args], capture_output=True, text=True, timeout=timeout,
                          env=dict(os.environ), stdin=subprocess.DEVNULL)


def wait_for(what: str, check, timeout: float, log: Path | None = None, every: float = 1.0):
    """Poll ``check`` until it returns something truthy (returned); fail naming ``what`` (and the end of
    ``log``, a server's output) after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = check()
        if result:
            return result
        time.sleep(every)
    tail = f"; the server's output ends:\n{log.read_text(errors='replace')[-5000:]}" if log else ""
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}{tail}")


def last_json_line(text: str) -> dict:
    return json.loads(text.strip().splitlines()[-1])


@pytest.fixture(scope="session")
def airflow_db():
    """The metadata DB (SQLite) of the test run's Airflow home, migrated once."""
    done = sluice("airflow", "db", "migrate")
    assert done.returncode == 0, done.stderr[-3000:]
