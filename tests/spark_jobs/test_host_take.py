"""The host driver takes the oldest job of its inbox once, and never starts one whose launcher is gone
(spark_jobs.driver.host, its folder sluice.contract.host)."""

from __future__ import annotations

import subprocess

from sluice.contract.host import HostFolder, read_json, write_json
from sluice.process import launcher_token
from spark_jobs.driver.host import _take


def test_the_oldest_job_is_taken_once_and_one_whose_launcher_is_gone_is_not_started(tmp_path):
    host = HostFolder(tmp_path / "driver").make()
    gone = subprocess.Popen(["true"])
    gone.wait()
    dead = f"{gone.pid}:0"  # its pid with no start time of a live process: gone
    write_json(host.inbox / "1-a.json", {"request": "/r/a.json", "launcher": dead})
    write_json(host.inbox / "2-b.json", {"request": "/r/b.json", "launcher": launcher_token()})
    write_json(host.inbox / "3-c.json", {"request": "/r/c.json", "launcher": launcher_token()})
    taken = _take(host)
    assert taken == host.running / "2-b.json" and read_json(taken)["request"] == "/r/b.json"
    assert read_json(host.done / "1-a.json") == {"code": 137, "message": "its launcher was gone: not started"}
    assert sorted(p.name for p in host.inbox.iterdir()) == ["3-c.json"]
    assert _take(host) == host.running / "3-c.json"
    assert _take(host) is None
