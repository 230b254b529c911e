"""Process trees: no Spark driver outlives the run that launched it.

A run is a process tree: the launcher (``sluice run`` or the Airflow task) -> spark-submit (a JVM) ->
the Python driver. Killing the launcher's child alone leaves the Python driver, and killing the
launcher with kill -9 leaves both: an orphan writer beside the retry. Two defences:

* :func:`kill_tree` kills a process and all its descendants (the operator's ``on_kill``);
* the launcher passes ``SLUICE_LAUNCHER`` (its pid and start time) to the driver, which stops itself and
  its JVM when that process is gone (``spark_jobs.run_pipeline.watch_launcher``).

Linux ``/proc`` only; elsewhere the watch is off and ``kill_tree`` kills the one process.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

LAUNCHER_ENV = "SLUICE_LAUNCHER"


def start_time(pid: int) -> str | None:
    """The process's start time (clock ticks since boot, /proc/<pid>/stat field 22); None if it is gone.
    With the pid, it names a process uniquely: a pid reused later has another start time."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2:].split()
    if fields[0] == "Z":  # a zombie has ended
        return None
    return fields[19]


def launcher_token(pid: int | None = None) -> str:
    pid = os.getpid() if pid is None else pid
    return f"{pid}:{start_time(pid) or ''}"


def launcher_alive(token: str) -> bool:
    pid, _, started = token.partition(":")
    if not Path("/proc").is_dir() or not pid.isdigit():
        return True  # cannot tell: never stop a run on a guess
    return start_time(int(pid)) == started


def _children_by_parent() -> dict[int, list[int]]:
    """Every process's children, from one pass over /proc."""
    tree: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir() if Path("/proc").is_dir() else []:
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        tree.setdefault(int(stat[stat.rindex(")") + 2:].split()[1]), []).append(int(entry.name))
    return tree


def descendants(pid: int) -> list[int]:
    tree = _children_by_parent()
    found, todo = [], [pid]
    while todo:
        for child in tree.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def kill_tree(pid: int, sig: int = signal.SIGKILL) -> list[int]:
    """Send ``sig`` to ``pid`` and every descendant (children first collected, so none escapes by
    re-parenting while we kill). Returns the pids signalled."""
    tree = [pid, *descendants(pid)]
    for member in tree:
        try:
            os.kill(member, sig)
        except ProcessLookupError:
            pass
    return tree
