"""The folder through which launchers hand jobs to a long-lived driver on their host (``SLUICE_SHARED_DRIVER=host``).

One folder per driver, named by the digest of what a driver cannot change once started (its Spark settings,
jars, master and environment: :func:`sluice.launch.host.driver_key`)::

    <SLUICE_SHARED_DRIVER_DIR>/<key>/
        start.lock          held (flock) by the launcher that starts the driver: one start at a time
        spawn.json          the spark-submit process of the driver now serving ({"pid", "token"})
        ready.json          written by the driver once its SparkSession is up ({"pid", "app_id", "started"})
        driver.log          the driver's output (Spark's, the jobs'), appended
        inbox/<id>.json     a job handed in: {"request": the request file, "launcher": its token,
                            "settings": the launcher's JOB_SETTINGS variables, ...}
        running/<id>.json   the job the driver took (renamed from the inbox: taken once)
        done/<id>.json      its end: {"code": 0 | 1 | 2 | 137, "message": ...}; the launcher removes it

A launcher writes its entry to ``inbox`` (atomically: a rename), starts the driver if none serves the folder,
and waits for ``done/<id>.json`` while the driver lives. The driver takes the oldest entry, runs it with the
same code as a spark-submit of its own (:func:`spark_jobs.driver.job.run_one`), writes the summary to the
request's ``summary_file``, then ``done``. An entry never taken when the driver ends is taken by the next one.

Imports neither Airflow nor PySpark.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

JOB_SETTINGS = ("SLUICE_LAKE_ROOT", "SLUICE_CHECKPOINT_ROOT", "SLUICE_PIPELINES", "SLUICE_LEDGER",
                "SLUICE_LEDGER_SPOOL", "SLUICE_LOCK_LEASE_SECONDS", "SLUICE_AIRFLOW_HOME", "SLUICE_MAINTENANCE_SCHEDULE",
                "SLUICE_FRESHNESS_SCHEDULE")
"""The settings variables that are a job's own, not its driver's: where its lake, checkpoints, specs and ledger
are, its lock's lease. They travel with each job (the entry's ``settings``; the driver sets them while the job
runs), so jobs of lakes that differ only in these share a driver. Every other ``SLUICE_`` variable is part of
the driver's key."""

BEGIN = "sluice host driver: begin"
END = "sluice host driver: end"
"""The lines the driver prints around a job's output in its log: the launcher copies what lies between."""


@dataclass(frozen=True)
class HostFolder:
    folder: Path

    @property
    def inbox(self) -> Path:
        return self.folder / "inbox"

    @property
    def running(self) -> Path:
        return self.folder / "running"

    @property
    def done(self) -> Path:
        return self.folder / "done"

    @property
    def log(self) -> Path:
        return self.folder / "driver.log"

    @property
    def spawn(self) -> Path:
        return self.folder / "spawn.json"

    @property
    def ready(self) -> Path:
        return self.folder / "ready.json"

    def make(self) -> HostFolder:
        for sub in (self.inbox, self.running, self.done):
            sub.mkdir(parents=True, exist_ok=True)
        return self

    def oldest_entry(self) -> Path | None:
        entries = sorted(self.inbox.glob("*.json"))
        return entries[0] if entries else None


def write_json(path: Path, data: dict[str, Any]) -> None:
    """``data`` to ``path`` at once: written beside it, then renamed over it (a reader never sees half)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data), encoding="utf-8")
    os.replace(tmp, path)


def read_json(path: Path) -> dict[str, Any] | None:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
