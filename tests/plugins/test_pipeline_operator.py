"""The operator's own decisions: the Spark connection must exist; test mode means dry run."""

from __future__ import annotations

import pytest
from sluice_airflow.pipeline_operator import SluicePipelineOperator, is_dry_run
from sluice_airflow.spark_connection import (
    SparkConnectionMissing,
    require_spark_connection,
)

from sluice.launch.environment import spark_connection_env


def test_missing_spark_connection_is_a_clear_error(monkeypatch):
    monkeypatch.delenv("AIRFLOW_CONN_NO_SUCH_SPARK", raising=False)
    with pytest.raises(SparkConnectionMissing) as caught:
        require_spark_connection("no_such_spark")
    message = str(caught.value)
    assert message.startswith("Airflow connection 'no_such_spark' is not defined")
    assert "silently fall back to master=yarn" in message
    assert "AIRFLOW_CONN_NO_SUCH_SPARK=" in message


def test_project_connection_points_at_local_master(lake, monkeypatch):
    env = spark_connection_env(lake)
    assert env == {"AIRFLOW_CONN_SLUICE_SPARK": '{"conn_type": "spark", "host": "local[*]"}'}
    monkeypatch.setenv("AIRFLOW_CONN_SLUICE_SPARK", env["AIRFLOW_CONN_SLUICE_SPARK"])
    require_spark_connection("sluice_spark")  # defined: no error


@pytest.mark.parametrize(("value", "expected"), [("True", True), ("true", True), ("", False), (None, False)])
def test_airflow_test_mode_means_dry_run(monkeypatch, value, expected):
    if value is None:
        monkeypatch.delenv("AIRFLOW_TEST_MODE", raising=False)
    else:
        monkeypatch.setenv("AIRFLOW_TEST_MODE", value)
    assert is_dry_run() is expected


def test_operator_holds_arguments_only(lake):
    op = SluicePipelineOperator(task_id="ingest", spec_path="/specs/orders.yaml")
    assert op.spec_path == "/specs/orders.yaml"
    assert op.application.endswith("spark_jobs/run_pipeline.py")
    assert "spec_path" in op.template_fields
    maintain = SluicePipelineOperator(task_id="maintain", spec_path="/specs/orders.yaml", kind="maintain")
    assert maintain.application.endswith("spark_jobs/maintain.py")
    with pytest.raises(ValueError, match="kind: 'compact' is not allowed; use one of: run, maintain"):
        SluicePipelineOperator(task_id="x", spec_path="/specs/orders.yaml", kind="compact")


def test_a_rebuild_after_an_upstream_correction_is_a_table_change_whose_event_names_the_slices():
    from sluice_airflow.pipeline_operator import event_extra, table_changed

    from sluice.contract import RunSummary

    def summary(**fields):
        return RunSummary(pipeline="orders", run_id="r", trigger="available_now", status="succeeded",
                          started_at="2026-11-25T10:00:00+00:00", sink="/lake/orders", checkpoint="/cp/orders",
                          quarantine="/lake/orders_q", **fields)

    base = {"dry_run": False, "mode": "incremental", "delta_version_before": 5, "delta_version_after": 7,
            "output_rows": 0}
    rebuilt = {**base, "upstream_changes": {"action": "rebuild", "rebuilds": [
        {"slice": "2026-11-01..2026-11-02", "written": True}, {"slice": "2026-11-04..2026-11-04", "written": False}]}}
    assert not table_changed(summary(**base))  # an empty batch's commit: nothing for the pipelines below
    assert table_changed(summary(**rebuilt))
    facts = {"run_id": "r", "delta_version": 7, "delta_versions": [6, 7], "rows": 0, "quarantined_rows": 0}
    assert event_extra(summary(**rebuilt)) == {**facts, "rebuilt": ["2026-11-01..2026-11-02"]}
    assert table_changed(summary(**{**base, "upstream_changes": {"action": "reset"}}))
    backfill = {**base, "mode": "backfill", "backfill": {"slice": "2026-11-01..2026-11-01"}, "delta_version_after": 6,
                "output_rows": 4, "quarantined_rows": 1,
                "airflow": {"dag_id": "orders", "dag_run_id": "backfill__1", "try_number": 1}}
    assert table_changed(summary(**backfill))
    assert event_extra(summary(**backfill)) == {
        "run_id": "r", "delta_version": 6, "delta_versions": [6, 6], "rows": 4, "quarantined_rows": 1,
        "dag_run_id": "backfill__1", "backfill": "2026-11-01..2026-11-01"}
    # a first run created the table: its event names every version from 0
    assert event_extra(summary(**{**base, "delta_version_before": None, "delta_version_after": 1}))[
        "delta_versions"] == [0, 1]
