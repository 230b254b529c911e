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

import dataclasses
import json
import os
import signal
import socket
import time
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


# --- the project's local servers (the Kafka broker, the S3 server) ------------------------------------------

def alive(pid: int | None) -> bool:
    """Whether the process runs (a zombie, an exited child not yet reaped, has ended)."""
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return not Path("/proc").is_dir() or start_time(pid) is not None


def stop_process(pid: int | None, timeout: float, *, crash: bool = False) -> None:
    """Stop a server the project started in a session of its own: SIGTERM to its process group, children
    included (SIGKILL at once with ``crash``, as a machine failure would), SIGKILL after ``timeout``; return
    once the group (or the one process, if it leads none) is gone."""
    if not alive(pid):
        _reap(pid)
        return
    group = os.getpgid(pid) == pid

    def send(sig: int) -> bool:
        """Signal the group or the process; False when none of it is left."""
        try:
            os.killpg(pid, sig) if group else os.kill(pid, sig)
        except ProcessLookupError:
            return False
        return True

    def gone() -> bool:
        _reap(pid)
        return not alive(pid) and (not group or not send(0) or not _group_members(pid))

    send(signal.SIGKILL if crash else signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while not gone() and time.monotonic() < deadline:
        time.sleep(0.2)
    if not gone():
        send(signal.SIGKILL)
        while not gone() and time.monotonic() < deadline + 10:
            time.sleep(0.1)


def _group_members(pgid: int) -> list[int]:
    """The live processes of a process group (zombies waiting for init to reap them have ended)."""
    members = []
    for entry in Path("/proc").iterdir() if Path("/proc").is_dir() else []:
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except (OSError, IndexError):
                continue
            if fields[0] != "Z" and int(fields[2]) == pgid:
                members.append(int(entry.name))
    return members


def _reap(pid: int | None) -> None:
    if not pid:
        return
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass


@dataclasses.dataclass
class ServerState:
    """A local server's folder and process, the base of its dataclass (which adds the ports): ``home/state.json``
    remembers it (ports, pid) between commands, :meth:`running` says whether it still runs."""

    home: Path
    pid: int | None = dataclasses.field(default=None, kw_only=True)

    def running(self) -> bool:
        return alive(self.pid)

    def save(self) -> None:
        state = {k: v for k, v in dataclasses.asdict(self).items() if k != "home"}
        (self.home / "state.json").write_text(json.dumps(state), encoding="utf-8")

    @classmethod
    def load(cls, home: Path):
        try:
            state = json.loads((home / "state.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        return cls(home=home, **state)


def port_open(port: int, host: str = "127.0.0.1") -> bool:
    """Whether something takes connections on ``host:port`` (half a second to answer)."""
    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex((host, port)) == 0


def log_tail(path: Path | None, chars: int = 3000) -> str:
    """``; see <path>, which ends:`` and the last ``chars`` characters of a server's log ("" without a log)."""
    if path is None:
        return ""
    try:
        text = Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError as err:
        return f"; see {path} (cannot read it: {err.strerror or err})"
    return f"; see {path}, which ends:\n{text[-chars:]}" if text.strip() else f"; see {path} (empty)"
