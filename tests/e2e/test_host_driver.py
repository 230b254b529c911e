"""`SLUICE_SHARED_DRIVER=host`: runs handed to one long-lived driver on the host (issue 42's fleet, the launcher's
side: `sluice run` here, the Airflow task in test_airflow.py). Each job keeps its own lock, checkpoint, table,
ledger row and summary; a failing one fails alone; a dry run and a backfill of one member change only what they
would change from a driver of their own; the driver killed mid-run fails that run, and the next resumes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

import pytest

from bench.chaos import (
    HALT_ENV,
    HALT_LINE,
    PAUSE_ENV,
    PAUSE_FILE_ENV,
    chaos_jar,
    chaos_spark_conf,
)
from sluice.contract.host import read_json
from sluice.operations.ledger import latest_runs
from sluice.process import descendants, launcher_alive, launcher_token
from tests.e2e.conftest import BIN, last_json_line, sluice, wait_for
from tests.helpers import (
    orders_spec,
    ran_here,
    tree_digest,
    write_lines,
    write_orders,
    write_spec,
)

IDLE_SECONDS = 45


@pytest.fixture
def host_dir(host_driver, monkeypatch) -> Path:
    monkeypatch.setenv("SLUICE_SHARED_DRIVER_IDLE_SECONDS", str(IDLE_SECONDS))
    return host_driver


def drivers(folder: Path) -> list[dict]:
    return [read_json(spawn) for spawn in sorted(folder.glob("*/spawn.json"))]


def ids(spark, table) -> list[int]:
    return sorted(r.id for r in spark.read.format("delta").load(str(table)).select("id").collect())


def day_line(i: int, day: int) -> str:
    return json.dumps({"id": i, "ts": f"2026-11-{day:02d}T08:00:00Z", "amount": i})


def daily_spec(sql: str) -> dict:
    return {"name": "h_daily", "source": {"format": "json", "path": "landing/h_daily",
                                          "schema": "id BIGINT, ts TIMESTAMP, amount DOUBLE"},
            "transform": {"sql": sql}, "sink": {"partition_by": ["day"]},
            "backfill": {"column": "day", "path": "landing/h_daily/dt={{ ds }}"}}


def test_runs_handed_to_the_host_driver_share_its_jvm_and_each_keeps_its_own_outcome(lake, spark, host_dir,
                                                                                      monkeypatch, tmp_path):
    write_spec(lake.pipelines_dir, daily_spec("SELECT id, ts, amount, to_date(ts) AS day FROM source"))
    two_spec = orders_spec(name="h_two", source={**orders_spec()["source"], "path": "landing/h_two"},
                           sink={"path": "bronze/h_two"})
    write_spec(lake.pipelines_dir, two_spec)
    write_spec(lake.pipelines_dir, orders_spec(name="h_bad", source={**orders_spec()["source"], "path": "landing/h_bad"},
                                               transform={"sql": "SELECT s.id FROM source s JOIN nowhere n ON s.id = n.id"}))
    for day in (1, 2, 3):
        write_lines(lake.lake_root / "landing" / "h_daily" / f"dt=2026-11-{day:02d}" / "a.json",
                    [day_line(day * 10 + k, day) for k in range(3)])
    write_orders(lake.lake_root / "landing" / "h_two", "a.json", range(7))
    write_orders(lake.lake_root / "landing" / "h_bad", "a.json", range(4))

    first = sluice("run", "h_daily")
    assert first.returncode == 0, first.stderr[-3000:]
    assert "sluice: started the host driver" in first.stderr
    daily = last_json_line(first.stdout)
    shared = daily["shared_driver"]
    assert (shared["driver"], shared["position"], daily["input_rows"]) == ("host", 1, 9)
    assert daily["phases_s"]["session"] > 0  # the JVM's start, paid by the first job

    second = sluice("run", "h_two")
    assert second.returncode == 0, second.stderr[-3000:]
    assert "started the host driver" not in second.stderr
    two = last_json_line(second.stdout)
    assert two["shared_driver"] == {**shared, "position": 2}  # the same driver: app, pid
    assert two["phases_s"]["session"] == 0 and two["input_rows"] == 7
    assert ids(spark, two["sink"]) == list(range(7))

    # a job that fails fails alone; its output (the driver's part of the log) comes back to its launcher
    failing = sluice("run", "h_bad")
    assert failing.returncode == 1
    bad = last_json_line(failing.stdout)
    assert bad["status"] == "failed" and "nowhere" in bad["error"], bad["error"]
    assert bad["shared_driver"]["position"] == 3
    assert "sluice: run of h_bad failed:" in failing.stderr, failing.stderr[-3000:]

    # a dry run of one member touches neither its checkpoint nor its table
    write_orders(lake.lake_root / "landing" / "h_two", "b.json", range(7, 10))
    checkpoint = Path(two["checkpoint"])
    before = tree_digest(checkpoint)
    dry = sluice("run", "h_two", "--dry-run")
    assert dry.returncode == 0, dry.stderr[-3000:]
    dry_summary = last_json_line(dry.stdout)
    assert (dry_summary["dry_run"], dry_summary["input_rows"], dry_summary["shared_driver"]["position"]) == (True, 3, 4)
    assert tree_digest(checkpoint) == before and ids(spark, two["sink"]) == list(range(7))

    # a backfill of one member rebuilds its slice with the fixed SQL; its checkpoint is not touched
    write_spec(lake.pipelines_dir, daily_spec("SELECT id, ts, amount * 100 AS amount, to_date(ts) AS day FROM source"))
    daily_checkpoint = tree_digest(Path(daily["checkpoint"]))
    backfill = sluice("run", "h_daily", "--backfill-from", "2026-11-02", "--backfill-to", "2026-11-02")
    assert backfill.returncode == 0, backfill.stderr[-3000:]
    rebuilt = last_json_line(backfill.stdout)
    assert (rebuilt["backfill"]["slice"], rebuilt["shared_driver"]["position"]) == ("2026-11-02..2026-11-02", 5)
    rows = spark.read.format("delta").load(daily["sink"]).collect()
    assert sorted((r.id, r.amount) for r in rows) == [(i, i * (100 if 20 <= i < 30 else 1))
                                                      for i in (10, 11, 12, 20, 21, 22, 30, 31, 32)]
    assert tree_digest(Path(daily["checkpoint"])) == daily_checkpoint

    again = sluice("run", "h_two")  # what the dry run saw, once
    assert again.returncode == 0, again.stderr[-3000:]
    assert (last_json_line(again.stdout)["input_rows"], last_json_line(again.stdout)["shared_driver"]["position"]) == (3, 6)
    assert ids(spark, two["sink"]) == list(range(10))
    ledger = str(lake.ledger_path)  # a ledger row each, as runs of their own
    assert {n: [r["status"] for r in latest_runs(ledger, n, limit=10)] for n in ("h_daily", "h_two", "h_bad")} == {
        "h_daily": ["succeeded", "succeeded"], "h_two": ["succeeded", "succeeded", "succeeded"], "h_bad": ["failed"]}

    # a job of another lake (its own lake, checkpoints, specs and ledger: the settings that travel with each job)
    # runs in the same driver, and writes there only
    other = tmp_path / "other"
    for key, sub in (("SLUICE_LAKE_ROOT", "lake"), ("SLUICE_CHECKPOINT_ROOT", "checkpoints"),
                     ("SLUICE_PIPELINES", "pipelines"), ("SLUICE_LEDGER", "ledger")):
        monkeypatch.setenv(key, str(other / sub))
    (other / "pipelines").mkdir(parents=True)
    write_spec(other / "pipelines", two_spec)
    write_orders(other / "lake" / "landing" / "h_two", "a.json", range(100, 104))
    elsewhere = sluice("run", "h_two")
    assert elsewhere.returncode == 0, elsewhere.stderr[-3000:]
    moved = last_json_line(elsewhere.stdout)
    assert (moved["shared_driver"], moved["input_rows"]) == ({**shared, "position": 7}, 4)
    assert moved["sink"] == str(other / "lake" / "bronze" / "h_two")
    assert moved["checkpoint"].startswith(f"{other / 'checkpoints'}/") and Path(moved["checkpoint"]).is_dir()
    assert ids(spark, moved["sink"]) == [100, 101, 102, 103] and ids(spark, two["sink"]) == list(range(10))
    assert [r["run_id"] for r in latest_runs(str(other / "ledger"), "h_two", limit=5)] == [moved["run_id"]]
    assert len(latest_runs(ledger, "h_two", limit=10)) == 3

    # one driver served all seven; with nothing to do it stops by itself
    (spawn,) = drivers(host_dir)
    assert launcher_alive(spawn["token"])
    log = next(host_dir.glob("*/driver.log"))
    wait_for("the idle host driver to stop", lambda: not launcher_alive(spawn["token"]), IDLE_SECONDS + 120, log)
    assert f"no job for {IDLE_SECONDS} s: stopping" in log.read_text()
    assert not list(host_dir.glob("*/ready.json"))


def test_a_host_driver_killed_mid_run_fails_that_run_and_the_next_resumes_exactly_once(lake, spark, host_dir,
                                                                                       monkeypatch):
    write_spec(lake.pipelines_dir, orders_spec(name="h_kill", spark_conf=chaos_spark_conf(),
                                               source={**orders_spec()["source"], "path": "landing/h_kill"},
                                               sink={"path": "bronze/h_kill"}))
    write_orders(lake.lake_root / "landing" / "h_kill", "a.json", range(6))
    monkeypatch.setenv("SPARK_DIST_CLASSPATH", str(chaos_jar()))
    # the host's JVM halts (no shutdown hooks, as kill -9) just before the sink's commit
    monkeypatch.setenv(HALT_ENV, f"^{lake.lake_root}/bronze/h_kill/_delta_log/\\d+\\.json$")
    halted = sluice("run", "h_kill")
    assert halted.returncode == 1
    assert ("the host driver ended during the run of h_kill (killed, or its JVM halted): the next run resumes "
            "from the checkpoint") in halted.stderr, halted.stderr[-3000:]
    assert HALT_LINE in next(host_dir.glob("*/driver.log")).read_text()
    assert not any(launcher_alive(d["token"]) for d in drivers(host_dir))
    # the run after it (in-process: the driver's recovery is every driver's), each record once
    assert ran_here(spark, lake, "h_kill", run_id="after")["input_rows"] == 6
    assert ids(spark, lake.lake_root / "bronze" / "h_kill") == list(range(6))


def test_a_launcher_killed_while_the_host_driver_runs_its_job_ends_the_driver(lake, spark, host_dir, monkeypatch,
                                                                            tmp_path):
    write_spec(lake.pipelines_dir, orders_spec(name="h_orphan", spark_conf=chaos_spark_conf(),
                                               source={**orders_spec()["source"], "path": "landing/h_orphan"},
                                               sink={"path": "bronze/h_orphan"}))
    write_orders(lake.lake_root / "landing" / "h_orphan", "a.json", range(8))
    paused = tmp_path / "paused"
    monkeypatch.setenv("SPARK_DIST_CLASSPATH", str(chaos_jar()))
    # the host's JVM waits right before the sink's commit while the file `paused` is there
    monkeypatch.setenv(PAUSE_ENV, f"^{lake.lake_root}/bronze/h_orphan/_delta_log/\\d+\\.json$")
    monkeypatch.setenv(PAUSE_FILE_ENV, str(paused))
    launcher = subprocess.Popen([str(BIN / "sluice"), "run", "h_orphan"], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, env=dict(os.environ), stdin=subprocess.DEVNULL,
                                start_new_session=True)
    try:
        wait_for("the host driver to pause in the run", paused.exists, 300)
        (spawn,) = drivers(host_dir)
        # the driver's JVM and its Python process (which holds the pipeline's driver lock)
        driver = [spawn["token"]] + [launcher_token(pid) for pid in descendants(spawn["pid"])]
        os.kill(launcher.pid, signal.SIGKILL)  # the launcher only: the driver is not its child
        launcher.wait()
        # the driver notices its job's launcher is gone and ends, paused mid-commit: no orphan writer
        log = next(host_dir.glob("*/driver.log"))
        wait_for("the host driver to end", lambda: not any(launcher_alive(t) for t in driver), 60, log)
        assert "the launcher of this job" in log.read_text() and "is gone: stopping the host driver" in log.read_text()
    finally:
        paused.unlink(missing_ok=True)
    # the next run (in-process) takes the lock and ingests every row once
    assert ran_here(spark, lake, "h_orphan", run_id="after")["input_rows"] == 8
    assert ids(spark, lake.lake_root / "bronze" / "h_orphan") == list(range(8))
