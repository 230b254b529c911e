"""The pipeline's DAG run by real Airflow (`airflow dags test` / `tasks test`) through SparkSubmitOperator."""

from __future__ import annotations

import json
from pathlib import Path

from sluice.launch.host import stop_drivers
from tests.e2e.conftest import sluice
from tests.helpers import (
    delta_version,
    orders_spec,
    run_here,
    tree_digest,
    write_lines,
    write_orders,
    write_spec,
)


def summary_of(output: str) -> dict:
    """The run summary the operator logs (and returns as XCom)."""
    lines = [line for line in output.splitlines() if "run summary: " in line]
    assert lines, output[-4000:]
    text = lines[-1].split("run summary: ", 1)[1]
    return json.loads(text[: text.rindex("}") + 1])


def xcom_return_value(dag_id: str) -> dict:
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    with create_session() as session:
        row = (session.query(XComModel).filter(XComModel.dag_id == dag_id, XComModel.key == "return_value")
               .order_by(XComModel.timestamp.desc()).first())
        value = row.value
    return json.loads(value) if isinstance(value, str) else value


def test_dags_test_runs_the_task_and_tasks_test_is_a_dry_run(lake, spark, airflow_db, host_driver):
    """Through the host's shared driver (SLUICE_SHARED_DRIVER=host): the Airflow processes of the run, the dry run
    and the maintenance hand their jobs to one driver that outlives each of them. (Every other Airflow test
    spark-submits a driver per task, the default.)"""
    write_spec(lake.pipelines_dir, orders_spec(name="af_orders"))
    landing = lake.lake_root / "landing" / "orders"
    write_orders(landing, "a.json", range(0, 12))
    write_lines(landing / "bad-a.json", ['{"id": 99, "ts": "2026-11-01T10:00:00Z", "amo'])

    # `airflow dags test`: the real task, SparkSubmitOperator -> spark-submit -> Delta
    first = sluice("airflow", "dags", "test", "af_orders")
    output = first.stdout + first.stderr
    assert first.returncode == 0, output[-4000:]
    summary = summary_of(output)
    assert (summary["input_rows"], summary["dry_run"], summary["delta_version_after"]) == (13, False, 0)
    assert summary["run_id"].startswith("manual__")
    shared = summary["shared_driver"]
    assert (shared["driver"], shared["position"]) == ("host", 1)
    xcom = xcom_return_value("af_orders")  # the summary is the task's XCom
    assert (xcom["input_rows"], xcom["quarantined_rows"]) == (13, 1)
    table, quarantine = summary["sink"], summary["quarantine"]
    assert spark.read.format("delta").load(table).count() == 12
    # one warning line in the task log: the count, and where to look
    assert (f"af_orders: 1 record(s) quarantined (bad records or expectations) in {quarantine}; see them with: "
            f"SELECT * FROM delta.`{quarantine}` WHERE run_id = '{summary['run_id']}'") in output
    assert spark.read.format("delta").load(quarantine).first().raw == '{"id": 99, "ts": "2026-11-01T10:00:00Z", "amo'

    # `airflow tasks test` sets AIRFLOW_TEST_MODE: a dry run that touches neither checkpoint nor table
    write_orders(landing, "b.json", range(12, 20))
    write_lines(landing / "bad-b.json", ["not json"])
    checkpoint = Path(summary["checkpoint"])
    before = tree_digest(checkpoint)
    versions = (delta_version(table), delta_version(quarantine))
    dry = sluice("airflow", "tasks", "test", "af_orders", "ingest", "2026-11-23")
    output = dry.stdout + dry.stderr
    assert dry.returncode == 0, output[-4000:]
    dry_summary = summary_of(output)
    assert (dry_summary["dry_run"], dry_summary["input_rows"], dry_summary["quarantined_rows"]) == (True, 9, 1)
    assert dry_summary["shared_driver"] == {**shared, "position": 2}  # the driver the first process started
    assert tree_digest(checkpoint) == before
    assert dry_summary["delta_version_after"] == 0
    assert (delta_version(table), delta_version(quarantine)) == versions  # no commit, as delta-rs reads them
    assert spark.read.format("delta").load(table).count() == 12
    assert spark.read.format("delta").load(quarantine).count() == 1  # the dry run's went to its scratch table

    # the next real run (in-process: the DAG's run is the first one's path) ingests what the dry run reported
    second = run_here(spark, lake, lake.pipelines_dir / "af_orders.yaml", run_id="second")
    assert second["input_rows"] == dry_summary["input_rows"]
    assert spark.read.format("delta").load(table).count() == 20
    assert spark.read.format("delta").load(quarantine).count() == 2

    # the maintenance DAG: a task per pipeline, OPTIMIZE + VACUUM through spark-submit, its summary the XCom
    sink_files = len(list(Path(table).rglob("*.parquet")))
    done = sluice("airflow", "dags", "test", "sluice_maintenance")
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-4000:]
    maintained = xcom_return_value("sluice_maintenance")
    assert (maintained["pipeline"], maintained["mode"], maintained["status"]) == ("af_orders", "maintenance", "succeeded")
    assert maintained["tables"]["sink"]["optimize"]["files_removed"] == sink_files >= 2
    assert maintained["tables"]["quarantine"]["optimize"]["files_removed"] == 2
    assert maintained["files_compacted"] == sink_files + 2 and maintained["bytes_removed"] == 0
    assert f"sluice maintenance of af_orders: OPTIMIZE compacted {sink_files + 2} files into 2" in output
    assert spark.read.format("delta").load(table).count() == 20
    from sluice.operations.ledger import latest_runs

    newest = latest_runs(str(lake.ledger_path), "af_orders")[0]
    assert (newest["mode"], newest["dag_id"]) == ("maintenance", "sluice_maintenance")
    assert json.loads(newest["maintenance"])["files_compacted"] == sink_files + 2
    assert maintained["shared_driver"] == {**shared, "position": 3}
    assert stop_drivers(host_driver)  # still serving (until its idle time): it outlived the three processes


def test_failed_run_fails_the_task_with_the_spark_error(lake, airflow_db):
    write_spec(lake.pipelines_dir, orders_spec(name="af_broken", retries=0,
                                               transform={"sql": "SELECT nope FROM source"}))
    write_orders(lake.lake_root / "landing" / "orders", "a.json", range(3))
    done = sluice("airflow", "dags", "test", "af_broken")
    output = done.stdout + done.stderr
    assert "run of af_broken failed:" in output
    assert "nope" in output
    assert "DagRun Finished: dag_id=af_broken" in output and "state=failed" in output


def test_airflow_retries_a_run_killed_mid_batch_and_the_retry_resumes_from_the_checkpoint(lake, spark, airflow_db,
                                                                                           tmp_path, monkeypatch):
    from collections import Counter

    from bench.chaos import HALT_ENV, chaos_jar, chaos_spark_conf

    # the first try's JVM halts (as kill -9) after batch 0's Delta commit, before the checkpoint records it
    monkeypatch.setenv("SPARK_DIST_CLASSPATH", str(chaos_jar()))
    monkeypatch.setenv(HALT_ENV, r"/checkpoints/af_retry/commits/0$")
    monkeypatch.setenv("SLUICE_CHAOS_HALT_ONCE", str(tmp_path / "halted-once"))
    write_spec(lake.pipelines_dir, orders_spec(name="af_retry", retries=1, retry_delay_seconds=0,
                                               spark_conf=chaos_spark_conf()))
    write_orders(lake.lake_root / "landing" / "orders", "a.json", range(0, 20))

    done = sluice("airflow", "dags", "test", "af_retry")
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-4000:]
    assert "sluice chaos: halting the JVM before writing" in output and (tmp_path / "halted-once").is_file()
    summary = summary_of(output)  # the retry's: Airflow ran the task again by itself
    assert summary["airflow"]["try_number"] == 2
    assert summary["skipped_batches"] == [0]  # Delta had batch 0: the retry wrote nothing twice
    table = spark.read.format("delta").load(summary["sink"])
    assert Counter(r.id for r in table.collect()) == Counter(range(20))
