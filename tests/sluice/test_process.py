"""Process trees: the launcher watch's liveness check and kill_tree, on real processes."""

from __future__ import annotations

import subprocess

from devservices.readiness import wait_until
from sluice.process import descendants, kill_tree, launcher_alive, launcher_token


def test_a_launcher_token_names_one_live_process():
    assert launcher_alive(launcher_token())
    child = subprocess.Popen(["sleep", "30"])
    token = launcher_token(child.pid)
    assert launcher_alive(token)
    child.kill()
    child.wait()
    assert not launcher_alive(token)
    pid, _, started = token.partition(":")
    assert not launcher_alive(f"{pid}:{int(started) + 1}")  # same pid, another start time: a reused pid


def test_kill_tree_reaches_grandchildren():
    root = subprocess.Popen(["sh", "-c", "sleep 60 & sleep 60 & wait"])
    grandchildren = wait_until("the shell's two children", lambda: len(descendants(root.pid)) >= 2 and
                               descendants(root.pid), 30, every=0.05, error=AssertionError)
    assert len(grandchildren) == 2
    assert sorted(kill_tree(root.pid)) == sorted([root.pid, *grandchildren])
    root.wait()
    # SIGKILL is delivered at once, but the processes end (and their new parent reaps them) a moment later
    wait_until(f"the killed processes {grandchildren} to end", lambda: not any(map(_running, grandchildren)), 30,
               every=0.05, error=AssertionError)


def _running(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False
