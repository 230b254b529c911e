"""The host driver takes the oldest job of its inbox once, and never starts one whose launcher is gone
(spark_jobs.driver.host, its folder sluice.contract.host)."""

from __future__ import annotations

import os
import subprocess

from sluice.contract.host import HostFolder, read_json, write_json
from sluice.process import launcher_token
from sluice.settings import load_settings
from spark_jobs.driver.host import _settings_of, _take


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


def test_a_job_runs_with_its_own_settings_and_the_driver_gets_its_own_back(monkeypatch):
    monkeypatch.setenv("SLUICE_LAKE_ROOT", "/driver/lake")
    monkeypatch.setenv("SLUICE_LEDGER", "/driver/ledger")
    monkeypatch.delenv("SLUICE_CHECKPOINT_ROOT", raising=False)
    monkeypatch.setenv("SLUICE_SPARK_CONF", "{}")  # not a job's own: left as the driver has it
    with _settings_of({"SLUICE_LAKE_ROOT": "/job/lake", "SLUICE_CHECKPOINT_ROOT": "s3a://b/cp",
                       "SLUICE_SPARK_CONF": "{\"x\": 1}"}):
        settings = load_settings()
        assert (str(settings.lake_root), settings.checkpoint_root) == ("/job/lake", "s3a://b/cp")
        assert "SLUICE_LEDGER" not in os.environ  # the job had none: its default, not the driver's
        assert os.environ["SLUICE_SPARK_CONF"] == "{}"
    assert (os.environ["SLUICE_LAKE_ROOT"], os.environ["SLUICE_LEDGER"]) == ("/driver/lake", "/driver/ledger")
    assert "SLUICE_CHECKPOINT_ROOT" not in os.environ
    with _settings_of(None):  # an entry from a launcher before job settings: the driver's own
        assert os.environ["SLUICE_LAKE_ROOT"] == "/driver/lake"
