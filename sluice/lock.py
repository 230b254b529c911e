"""One run of a pipeline at a time: a lock per pipeline, held by the processes of the run.

The lock is an advisory ``flock`` on a file under ``<checkpoint root>/_locks/``: the kernel releases it
when the process holding it ends, however it ends (kill -9 included), so a killed run never blocks the
next one. Two locks per pipeline:

* ``<name>.lock``: taken by the launcher (``sluice run``, the Airflow task) before spark-submit starts, so
  a second run is refused at once, without waiting for a JVM;
* ``<name>.driver.lock``: taken by the Spark driver itself, so that a driver left running after its
  launcher died (an orphan) still keeps the next run's driver from writing beside it.

The file holds who took it (pid, host, run id, Airflow ids), which the refusal message quotes.
Works on one host, or hosts sharing a file system with working ``flock`` (local disk, NFSv4).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


class PipelineBusy(RuntimeError):
    """Another run of the pipeline holds its lock; the message names that run."""

    def __init__(self, pipeline: str, holder: dict[str, Any], lock_file: Path, waited: float = 0):
        self.pipeline = pipeline
        self.holder = holder
        self.lock_file = lock_file
        waited_text = f" after waiting {waited:.0f} s" if waited else ""
        super().__init__(
            f"pipeline {pipeline} is already running ({describe_holder(holder)}); this run was refused{waited_text} "
            "and changed nothing. Wait for that run to finish (one run of a pipeline at a time keeps its checkpoint "
            f"consistent); the lock frees itself when that process ends. Lock file: {lock_file}"
        )


def describe_holder(holder: dict[str, Any]) -> str:
    if not holder:
        return "holder unknown"
    parts = [f"pid {holder.get('pid')} on {holder.get('host')}"]
    if holder.get("mode") == "maintenance":
        parts.append("maintenance (OPTIMIZE/VACUUM)")
    if holder.get("run_id"):
        parts.append(f"run {holder['run_id']}")
    if holder.get("dag_id"):
        parts.append(f"Airflow dag {holder['dag_id']} run {holder.get('dag_run_id')} try {holder.get('try_number')}")
    if holder.get("since"):
        parts.append(f"since {holder['since']}")
    return ", ".join(parts)


def lock_dir(checkpoint_root: Path) -> Path:
    return checkpoint_root / "_locks"


@dataclass
class PipelineLock:
    """``with PipelineLock(path, "orders", holder={...}):`` -- raises :class:`PipelineBusy` if held."""

    path: Path
    pipeline: str
    holder: dict[str, Any] = field(default_factory=dict)
    _fd: int | None = None

    wait_seconds: float = 0
    """How long :meth:`acquire` waits for the holder to finish before refusing (0: refuse at once).
    Maintenance waits; a run is refused at once."""

    def acquire(self) -> PipelineLock:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        deadline = time.monotonic() + self.wait_seconds
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() < deadline:
                    time.sleep(min(2.0, max(0.05, deadline - time.monotonic())))
                    continue
                holder = _read(fd)
                os.close(fd)
                raise PipelineBusy(self.pipeline, holder, self.path, self.wait_seconds) from None
        info = {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "since": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            **{k: v for k, v in self.holder.items() if v is not None},
        }
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(info).encode(), 0)
        self._fd = fd
        return self

    def release(self) -> None:
        if self._fd is not None:
            os.ftruncate(self._fd, 0)
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> PipelineLock:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


def _read(fd: int) -> dict[str, Any]:
    try:
        text = os.pread(fd, 65536, 0).decode()
        return json.loads(text) if text.strip() else {}
    except (OSError, ValueError):
        return {}


def launcher_lock(checkpoint_root: Path, pipeline: str, holder: dict[str, Any]) -> PipelineLock:
    return PipelineLock(lock_dir(checkpoint_root) / f"{pipeline}.lock", pipeline, holder)


BACKFILL_LOCK_WAIT_SECONDS = 3600
"""A backfill run waits this long for the pipeline's running run (incremental, another backfill day) to
finish: an Airflow backfill starts several days' runs at once, and they are serialized, not refused."""


def run_lock(checkpoint_root: Path, pipeline: str, holder: dict[str, Any], *, dry_run: bool, backfill: bool = False):
    """What a launcher holds around spark-submit: the pipeline's launcher lock for a real run (refused at once
    if held; a backfill run waits for it); nothing for a dry run, which changes neither checkpoint nor table."""
    if dry_run:
        return contextlib.nullcontext()
    lock = launcher_lock(checkpoint_root, pipeline, holder)
    if backfill:
        lock.wait_seconds = BACKFILL_LOCK_WAIT_SECONDS
    return lock


def maintenance_lock(checkpoint_root: Path, pipeline: str, holder: dict[str, Any], wait_seconds: float):
    """What a maintenance launcher holds: the pipeline's launcher lock, waited for (a run finishes first)."""
    return PipelineLock(lock_dir(checkpoint_root) / f"{pipeline}.lock", pipeline, holder, wait_seconds=wait_seconds)


def driver_lock(checkpoint_root: Path, pipeline: str, holder: dict[str, Any]) -> PipelineLock:
    return PipelineLock(lock_dir(checkpoint_root) / f"{pipeline}.driver.lock", pipeline, holder)
