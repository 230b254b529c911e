"""The pipeline's DAG run by real Airflow (`airflow dags test` / `tasks test`) through SparkSubmitOperator."""

from __future__ import annotations

import json
from pathlib import Path

from tests.e2e.conftest import sluice
from tests.helpers import orders_spec, tree_digest, write_orders, write_spec


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


def test_dags_test_runs_the_task_and_tasks_test_is_a_dry_run(lake, spark, airflow_db):
    write_spec(lake.pipelines_dir, orders_spec(name="af_orders"))
    landing = lake.lake_root / "landing" / "orders"
    write_orders(landing, "a.json", range(0, 12))

    # `airflow dags test`: the real task, SparkSubmitOperator -> spark-submit -> Delta
    first = sluice("airflow", "dags", "test", "af_orders")
    output = first.stdout + first.stderr
    assert first.returncode == 0, output[-4000:]
    summary = summary_of(output)
    assert (summary["input_rows"], summary["dry_run"], summary["delta_version_after"]) == (12, False, 1)
    assert summary["run_id"].startswith("manual__")
    assert xcom_return_value("af_orders")["input_rows"] == 12  # the summary is the task's XCom
    table = summary["sink"]
    assert spark.read.format("delta").load(table).count() == 12

    # `airflow tasks test` sets AIRFLOW_TEST_MODE: a dry run that touches neither checkpoint nor table
    write_orders(landing, "b.json", range(12, 20))
    checkpoint = Path(summary["checkpoint"])
    before = tree_digest(checkpoint)
    dry = sluice("airflow", "tasks", "test", "af_orders", "ingest", "2026-11-23")
    output = dry.stdout + dry.stderr
    assert dry.returncode == 0, output[-4000:]
    dry_summary = summary_of(output)
    assert (dry_summary["dry_run"], dry_summary["input_rows"]) == (True, 8)
    assert tree_digest(checkpoint) == before
    assert dry_summary["delta_version_after"] == 1
    assert spark.read.format("delta").load(table).count() == 12

    # the next real run ingests what the dry run reported
    second = sluice("airflow", "dags", "test", "af_orders")
    output = second.stdout + second.stderr
    assert second.returncode == 0, output[-4000:]
    assert summary_of(output)["input_rows"] == dry_summary["input_rows"]
    assert spark.read.format("delta").load(table).count() == 20


def test_failed_run_fails_the_task_with_the_spark_error(lake, airflow_db):
    write_spec(lake.pipelines_dir, orders_spec(name="af_broken", retries=0,
                                               transform={"sql": "SELECT nope FROM source"}))
    write_orders(lake.lake_root / "landing" / "orders", "a.json", range(3))
    done = sluice("airflow", "dags", "test", "af_broken")
    output = done.stdout + done.stderr
    assert "run of af_broken failed:" in output
    assert "nope" in output
    assert "DagRun Finished: dag_id=af_broken" in output and "state=failed" in output
