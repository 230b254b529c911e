"""End-to-end fixtures: real `sluice` and `airflow` processes, real spark-submit."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from devservices.readiness import wait_until

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
    """Poll ``check`` until it returns something truthy (returned); fail the test naming ``what`` (and the end
    of ``log``, a server's output) after ``timeout`` seconds. The project's one wait (devservices.readiness): a
    probe of a server returns None for a half-started answer (``Api.connect``, ``Api.poll``)."""
    return wait_until(what, check, timeout, log, every=every, error=AssertionError)


def last_json_line(text: str) -> dict:
    return json.loads(text.strip().splitlines()[-1])


def run_summary(name: str) -> dict:
    """`sluice run NAME`, which must succeed: its summary."""
    done = sluice("run", name)
    assert done.returncode == 0, done.stderr[-3000:]
    return last_json_line(done.stdout)


@pytest.fixture
def host_driver(tmp_path, monkeypatch) -> Path:
    """Jobs handed to this host's long-lived driver (``SLUICE_SHARED_DRIVER=host``, sluice.launch.host), whose
    folders are the test's; returns that folder. The drivers still serving at the test's end are stopped."""
    from sluice.launch.host import stop_drivers

    folder = tmp_path / "drivers"
    monkeypatch.setenv("SLUICE_SHARED_DRIVER", "host")
    monkeypatch.setenv("SLUICE_SHARED_DRIVER_DIR", str(folder))
    yield folder
    stop_drivers(folder)


@pytest.fixture(scope="session")
def warm_drivers(tmp_path_factory) -> Path:
    """This worker's host drivers folder, kept for the whole run: the tests of :func:`shared_driver` hand their
    jobs to the drivers in it, warm from the tests before. Stopped at the run's end."""
    from sluice.launch.host import stop_drivers

    folder = tmp_path_factory.mktemp("warm-drivers")
    yield folder
    stop_drivers(folder)


@pytest.fixture
def shared_driver(warm_drivers, monkeypatch) -> Path:
    """Jobs handed to this worker's long-lived host driver (``SLUICE_SHARED_DRIVER=host``), shared with the other
    tests that ask for it (one JVM start per worker and set of Spark settings, instead of one per run): for the
    tests whose subject is not the spark-submit itself. The lake, checkpoints, specs and ledger stay the test's
    own (they travel with each job: sluice.contract.host.JOB_SETTINGS)."""
    monkeypatch.setenv("SLUICE_SHARED_DRIVER", "host")
    monkeypatch.setenv("SLUICE_SHARED_DRIVER_DIR", str(warm_drivers))
    monkeypatch.setenv("SLUICE_SHARED_DRIVER_IDLE_SECONDS", "1800")
    return warm_drivers


@pytest.fixture(scope="session")
def airflow_db() -> Path:
    """The metadata DB (SQLite) of the test run's Airflow home, migrated once per run. Returns a pristine copy
    of it taken right after the migration: the template from which every `airflow standalone` of the run starts
    (tests.e2e.live_airflow), instead of migrating a new DB of its own (~40 s on a busy machine). Under xdist the
    first worker to get here migrates and leaves the template for the others (a file lock; the run's id names
    it), which copy it."""
    import atexit
    import fcntl
    import tempfile

    home = Path(os.environ["SLUICE_AIRFLOW_HOME"])
    template = home / "migrated-template.db"  # removed with the run's Airflow home (tests/conftest.py)
    run = os.environ.get("PYTEST_XDIST_TESTRUNUID")
    shared = Path(tempfile.gettempdir()) / f"sluice-test-airflow-{run}.db" if run else None
    if shared is None:
        _migrate(home, template)
        return template
    with open(f"{shared}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not shared.is_file():
            _migrate(home, template)
            shutil.copyfile(template, f"{shared}.part")
            os.replace(f"{shared}.part", shared)
            # gone with the worker that made it (a worker that needs it later migrates its own)
            atexit.register(lambda: [Path(p).unlink(missing_ok=True) for p in (shared, f"{shared}.lock")])
        else:
            shutil.copyfile(shared, template)
            shutil.copyfile(shared, home / "airflow.db")
    return template


def _migrate(home: Path, template: Path) -> None:
    done = sluice("airflow", "db", "migrate")
    assert done.returncode == 0, done.stderr[-3000:]
    shutil.copyfile(home / "airflow.db", template)
