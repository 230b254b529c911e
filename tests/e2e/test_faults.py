"""Faults across process boundaries: a second run, a killed launcher, Airflow's on_kill, and the short chaos
runs (kill -9 at random and at exact moments, then compare the tables with the input by id), on local disk
and in a bucket of the real S3 server, which one round stops mid-run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from bench.chaos import (
    BAD_COUNTS,
    BAD_PER_ROUND,
    ROWS_PER_ROUND,
    STORE_DOWN_BOUND_SECONDS,
    Harness,
    Lake,
)
from sluice.process import descendants
from tests.e2e.conftest import BIN, last_json_line, sluice, wait_for
from tests.helpers import orders_spec, ran_here, run_here, write_orders, write_spec


def driver_processes(root: int) -> dict[str, list[int]]:
    """The spark-submit JVM and the Python driver under a launcher process."""
    found: dict[str, list[int]] = {"jvm": [], "driver": []}
    for pid in descendants(root):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if "org.apache.spark.deploy.SparkSubmit" in cmdline:
            found["jvm"].append(pid)
        elif "run_pipeline.py" in cmdline and "java" not in cmdline.split(" ")[0]:
            found["driver"].append(pid)
    return found


def both_running(root: int) -> dict[str, list[int]] | None:
    """The spark-submit JVM and the Python driver under ``root``, once both are there."""
    found = driver_processes(root)
    return found if found["jvm"] and found["driver"] else None


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def start(*args: str) -> subprocess.Popen:
    return subprocess.Popen([str(BIN / "sluice"), *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ), stdin=subprocess.DEVNULL, start_new_session=True)


def test_a_second_run_is_refused_at_once_naming_the_first_which_completes(lake, spark):
    spec_path = write_spec(lake.pipelines_dir, orders_spec())
    write_orders(lake.lake_root / "landing" / "orders", "a.json", range(0, 40))
    first = start("run", str(spec_path))
    lock_file = lake.checkpoint_root / "_locks" / "orders.lock"
    wait_for("the first run's lock", lambda: lock_file.is_file() and lock_file.read_text(), 60, every=0.2)

    second = sluice("run", "orders")
    assert second.returncode == 1
    # refused before any JVM starts: the launcher logs the spark-submit command before it starts one (a time
    # bound would say the same on an idle machine only)
    assert "spark-submit" not in second.stderr and "org.apache.spark" not in second.stderr, second.stderr[-3000:]
    assert f"pipeline orders is already running (pid {first.pid} on " in second.stderr
    assert "run cli__" in second.stderr and "Wait for that run to finish" in second.stderr
    # the refused run is accounted for: its summary is the last stdout line, its row is in the ledger
    refused = last_json_line(second.stdout)
    assert (refused["status"], refused["refused"], refused["batches"]) == ("failed", True, 0)
    assert refused["error"].startswith("refused: pipeline orders is already running (pid ")

    out, err = first.communicate(timeout=600)
    assert first.returncode == 0, err[-3000:]
    assert last_json_line(out)["input_rows"] == 40
    status = sluice("status", "orders")
    assert status.returncode == 0, status.stderr[-3000:]
    runs = [line.split() for line in status.stdout.splitlines()[3:]]
    assert sorted((r[2], r[4]) for r in runs) == sorted([(last_json_line(out)["run_id"], "succeeded"),
                                                         (refused["run_id"], "failed")])
    assert spark.read.format("delta").load(str(lake.lake_root / "bronze" / "orders")).count() == 40


def test_killing_the_launcher_stops_its_spark_driver_and_jvm(lake, spark):
    spec_path = write_spec(lake.pipelines_dir, orders_spec())
    write_orders(lake.lake_root / "landing" / "orders", "a.json", range(0, 25))
    launcher = start("run", str(spec_path))
    tree = wait_for("spark-submit and the Python driver", lambda: both_running(launcher.pid), 90, every=0.2)

    os.kill(launcher.pid, signal.SIGKILL)  # the launcher only: its children are left to themselves
    launcher.wait()
    survivors = lambda: [p for p in tree["jvm"] + tree["driver"] if alive(p)]  # noqa: E731
    wait_for(f"the orphaned driver processes {survivors()} to stop", lambda: not survivors(), 30, every=0.2)

    # no orphan writer: the next run (in-process) takes the lock and ingests every row exactly once
    assert ran_here(spark, lake, "orders", run_id="after-kill")["input_rows"] == 25
    assert spark.read.format("delta").load(str(lake.lake_root / "bronze" / "orders")).count() == 25


def test_airflow_on_kill_kills_the_whole_spark_submit_tree(lake, airflow_db):
    write_spec(lake.pipelines_dir, orders_spec(name="af_kill"))
    write_orders(lake.lake_root / "landing" / "orders", "a.json", range(0, 10))
    task = subprocess.Popen(
        [str(BIN / "sluice"), "airflow", "tasks", "test", "af_kill", "ingest", "2026-11-23"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=dict(os.environ),
        stdin=subprocess.DEVNULL, start_new_session=True,
    )
    tree = wait_for("the task's spark-submit and Python driver", lambda: both_running(task.pid), 120, every=0.2)

    task.send_signal(signal.SIGTERM)  # what Airflow sends a task it stops (UI "mark failed", timeout)
    output, _ = task.communicate(timeout=120)
    assert "on_kill: killed the spark-submit process tree" in output, output[-4000:]
    # SIGKILL is sent; the processes end a moment later (a busy machine may take its time)
    survivors = lambda: [p for p in tree["jvm"] + tree["driver"] if alive(p)]  # noqa: E731
    wait_for(f"the killed spark-submit tree {survivors()} to end", lambda: not survivors(), 30, every=0.2)


def assert_rounds_lost_and_duplicated_nothing(plan: dict[str, list[str]], results: dict) -> None:
    for kind, result in results.items():
        halts = [m for m in plan[kind] if m != "random"]
        # every planned halt happened: the JVM stopped at its point (never a run that finished instead)
        assert result["halted"] == len(halts) and result["never_fired"] == [], (kind, result)
        assert {m: result["kills"][m] for m in halts} == {m: halts.count(m) for m in halts}
        assert result["rounds"] == len(plan[kind]), (kind, result)
        assert result["failures"] == []
        for key in BAD_COUNTS:
            assert result[key] == 0, (kind, key, result)
        assert result["rows"] > 0
        if "between_commits" in halts:
            # a kill between the two commits left a batch that Delta had committed: the rerun skipped it
            assert result["replayed_batches"] >= 1, kind
        # each bad record is in the quarantine table exactly once (BAD_PER_ROUND per input: every round, a
        # missed one too, and the clean first run before random kills)
        inputs = result["rounds"] + result["missed"] + ("random" in plan[kind])
        assert result["quarantine_rows"] == BAD_PER_ROUND * inputs, kind


def test_one_halt_at_each_kill_point_no_other_test_covers_loses_and_duplicates_nothing(tmp_path, kafka_broker, spark):
    # The kill points of the short chaos run below that no other test of `make test` halts at, one round each
    # (test_cli_clean_source.py, the Airflow retry in test_airflow.py and the CLI backfill halt files
    # pipelines between their Delta and checkpoint commits): the files pipeline between its sink's and its
    # quarantine's commits and right before the marker's clear (the one-pass path), the Kafka pipeline before
    # its quarantine's commit (the counted path: quarantine first, then the sink), the MERGE between its
    # commits and before the discovery index writes a batch's file list (right after the listing); the files
    # pipeline's incremental listing before its marks are written (after the batch lists).
    # Each round's input has bad records: malformed, a wrong type, an expectation set to quarantine.
    plan = {"files": ["before_quarantine_commit", "before_marker_clear", "before_listing_marks"],
            "kafka": ["before_quarantine_commit"],
            "merge": ["between_commits", "before_index_list"]}
    # the killed runs are spark-submits (`sluice run`, halted as kill -9); each run after a kill is made in this
    # session, as the product's driver makes it (the replay is Spark's and sluice's, not the process's)
    def here(spec_path, env):
        from sluice.settings import load_settings

        return run_here(spark, load_settings(env), spec_path, run_id=f"after-kill-{time.monotonic_ns()}")

    harness = Harness(tmp_path / "chaos", seed=7, kinds=list(plan), modes=["random"],
                      bootstrap=kafka_broker.bootstrap_servers, clean_run=here)
    results = harness.run(0, plan=plan)
    print(json.dumps(results, indent=1))
    assert_rounds_lost_and_duplicated_nothing(plan, results)
    assert results["files"]["rows"] == ROWS_PER_ROUND * (len(plan["files"]) + results["files"]["missed"])


# `make chaos` runs it (before its 50 rounds per pipeline), `make test` does not (~9 min of CI's suite on
# 2 cores): the test above halts once at each kill point no other test of `make test` covers.
@pytest.mark.chaos
@pytest.mark.timeout(1800)  # 9 kills and 9 clean runs: on a machine busy with other work, past the 900 s default
def test_short_chaos_run_loses_and_duplicates_nothing(tmp_path, kafka_broker):
    # every pipeline gets the exact kill between the Delta commit and the checkpoint commit, and a halt before
    # its quarantine table's commit (on the files pipeline's one-pass path: between the batch's two commits);
    # files also the marker's clear and a kill -9 of the whole process tree at a random moment, the MERGE a
    # halt right before its sink's Delta commit (`make chaos` runs 50 rounds each, drawn from every mode).
    # Each round's input has bad records: malformed, a wrong type, an expectation set to quarantine violated.
    plan = {"files": ["between_commits", "before_quarantine_commit", "before_marker_clear", "random"],
            "kafka": ["between_commits", "before_quarantine_commit"],
            "merge": ["between_commits", "before_commit"]}
    harness = Harness(tmp_path / "chaos", seed=7, kinds=list(plan), modes=["random"],
                      bootstrap=kafka_broker.bootstrap_servers)
    # the three pipelines' rounds at the same time, one thread each, as `make chaos` runs them (--parallel)
    results = harness.run(0, plan=plan, parallel=True)
    print(json.dumps(results, indent=1))
    assert_rounds_lost_and_duplicated_nothing(plan, results)
    assert results["files"]["killed_in_flight"] == 1
    assert results["files"]["rows"] == ROWS_PER_ROUND * (4 + 1 + results["files"]["missed"])  # + the clean first run


# `make chaos` runs it too (~3.5 min of CI's suite): its halts in a bucket are `make chaos CHAOS_STORAGE=s3`'s
# modes, and the store stopped mid-run its store_down rounds.
@pytest.mark.chaos
@pytest.mark.timeout(1800)
def test_short_chaos_run_in_a_bucket_loses_nothing_and_a_stopped_store_fails_the_run_in_bounded_time(
        tmp_path, s3_server):
    # tables, checkpoints, ledger and lock in a bucket; the exact moments come from the fault-injecting S3A
    # (jvm/chaos): a halt right before the sink's Delta commit (data files written), one between the Delta
    # commit and the checkpoint's commits/N (kill -9 at random moments: the local test above and `make chaos
    # CHAOS_STORAGE=s3`). Then the store itself is killed while a run waits right before its Delta commit.
    from devservices.s3_server import create_bucket

    create_bucket(s3_server, "chaos-faults")
    plan = {"files": ["before_commit", "between_commits"]}
    harness = Harness(tmp_path / "chaos", seed=11, kinds=["files"], modes=["random"],
                      lake=Lake.on_server(s3_server, "chaos-faults"))
    results = harness.run(0, plan=plan, store_down_rounds=1)
    print(json.dumps(results, indent=1))
    result = results["files"]
    assert result["halted"] == 2 and result["never_fired"] == [], result
    assert result["kills"]["before_commit"] == 1 and result["kills"]["between_commits"] == 1
    assert result["rounds"] == 2 and result["missed"] == 0
    assert result["failures"] == [], result["failures"]
    for key in BAD_COUNTS:
        assert result[key] == 0, (key, result)
    assert result["replayed_batches"] >= 1  # the halt between the commits: Delta had the batch, the rerun skipped it
    [down] = result["store_down"]
    # the run failed, within the bound, saying which store did not answer; the next run then took the batch
    assert down["ok"] and down["exit"] == 1 and down["seconds_to_fail"] <= STORE_DOWN_BOUND_SECONDS, down
    assert down["error"].startswith(f"object store unreachable at {s3_server.endpoint} during the run: "), down
    # every input once: two rounds and the store-down round
    inputs = 2 + 1
    assert result["rows"] == ROWS_PER_ROUND * inputs
    assert result["quarantine_rows"] == BAD_PER_ROUND * inputs
