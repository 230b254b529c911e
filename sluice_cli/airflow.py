"""``sluice airflow ARGS...`` (Airflow's CLI in the project's environment; ``standalone`` supervised so that a
stop ends everything it started) and ``sluice env`` (that environment as shell exports)."""

from __future__ import annotations

import argparse
import contextlib
import os
import shlex
import sqlite3
import subprocess
import sys
from pathlib import Path

from sluice.launch.environment import project_env
from sluice.settings import Settings
from sluice_cli.pipelines import _apply_env

POOL_DESCRIPTION = "sluice: a slot per spark-submit of a run or maintenance (SLUICE_POOL_SLOTS when created)"


def cmd_airflow(args: argparse.Namespace, settings: Settings) -> int:
    _apply_env(settings)
    airflow = str(Path(sys.executable).parent / "airflow")
    sqlite = "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN" not in os.environ
    if sqlite and not (settings.airflow_home / "airflow.db").exists() and args.args[:1] != ["db"]:
        # first use: the SQLite metadata DB of the demo set-up, with the sluice pool
        subprocess.run([airflow, "db", "migrate"], check=True, stdout=subprocess.DEVNULL)
        ensure_pool(airflow, settings)
    if args.args[:2] == ["db", "migrate"]:
        done = subprocess.run([airflow, *args.args])
        if done.returncode == 0:
            ensure_pool(airflow, settings)
        return done.returncode
    if args.args[:1] == ["standalone"]:
        ensure_pool(airflow, settings)  # a DB migrated without sluice: its tasks would wait for the pool forever
        return _supervise([airflow, *args.args])
    os.execv(airflow, [airflow, *args.args])


def ensure_pool(airflow: str, settings: Settings) -> None:
    """The Airflow pool every sluice task takes a slot of (``SLUICE_AIRFLOW_POOL``), created with
    ``SLUICE_POOL_SLOTS`` slots unless it exists: a pool an operator resized keeps its slots. (Airflow never
    schedules a task whose pool does not exist: it waits, with a warning in the scheduler's log only.)"""
    if _pool_in_sqlite(settings) or (
            _pool_in_sqlite(settings) is None
            and subprocess.run([airflow, "pools", "get", settings.airflow_pool], capture_output=True).returncode == 0):
        return
    done = subprocess.run([airflow, "pools", "set", settings.airflow_pool, str(settings.pool_slots), POOL_DESCRIPTION],
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"could not create the Airflow pool {settings.airflow_pool}: {done.stderr[-1500:]}")
    print(f"sluice: created the Airflow pool {settings.airflow_pool} ({settings.pool_slots} slots: one per "
          "spark-submit; SLUICE_POOL_SLOTS, or resize it in the UI under Admin > Pools)", file=sys.stderr)


def _pool_in_sqlite(settings: Settings) -> bool | None:
    """Whether the project's SQLite metadata DB has the pool (read without starting Airflow); None when the
    DB is another one, or not there."""
    if "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN" in os.environ:
        return None
    path = settings.airflow_home / "airflow.db"
    if not path.is_file():
        return None
    try:
        with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30)) as db:
            return db.execute("SELECT 1 FROM slot_pool WHERE pool = ?", (settings.airflow_pool,)).fetchone() is not None
    except sqlite3.Error:
        return None


def _supervise(command: list[str], grace_seconds: float = 30.0) -> int:
    """Run ``command`` (``airflow standalone``) as a child and stop everything it started when this process is
    told to stop: SIGTERM, SIGINT or SIGHUP is passed on to the child's whole tree, which gets ``grace_seconds``
    to end before what is left is killed. (``airflow standalone`` stopped with SIGTERM leaves its scheduler, API
    server, triggerer, DAG processor and workers running: a wrapper must stop what it started.) The handler only
    takes note; the loop below does the work (a handler that waited on the child would wait on itself)."""
    import signal
    import time

    from sluice.process import alive, kill_tree

    child = subprocess.Popen(command, start_new_session=True)
    stop: dict[str, object] = {}

    def note(signum, _frame):
        stop.setdefault("signal", signum)

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, note)
    tree: list[int] = []
    while True:
        code = child.poll()
        if "signal" in stop and "deadline" not in stop:
            tree = kill_tree(child.pid, signal.SIGTERM)
            stop["deadline"] = time.monotonic() + grace_seconds
        if "deadline" in stop:
            left = [pid for pid in tree if pid != child.pid and alive(pid)]
            if code is not None and not left:
                return 128 + int(stop["signal"])
            if time.monotonic() > stop["deadline"]:
                for pid in left:  # re-parented when the child ended: no longer under it
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGKILL)
                if code is None:
                    kill_tree(child.pid, signal.SIGKILL)
                child.wait()
                return 128 + int(stop["signal"])
        elif code is not None:
            return code
        time.sleep(0.2)


def cmd_env(args: argparse.Namespace, settings: Settings) -> int:
    for key, value in sorted(project_env(settings).items()):
        print(f"export {key}={shlex.quote(value)}")
    return 0
