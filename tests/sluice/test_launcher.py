"""The one launch step (lock, spark-submit, summary, failure) that ``sluice run`` and the Airflow task share.

``submit`` here is a function standing where spark-submit runs: it writes what a driver writes (or nothing,
or fails), so each way a job ends is checked without starting a JVM. The real spark-submit runs in
tests/e2e (test_cli_run, test_airflow, test_faults).
"""

from __future__ import annotations

import contextlib
import json

import pytest

from sluice.contract import JobRequest, RunSummary, maintain_job, run_job
from sluice.launch.launcher import JobFailed, launch
from sluice.launch.submit import build_plan
from sluice.storage.lock import run_lock
from tests.helpers import make_spec, orders_spec


def driver_summary(job: JobRequest, **fields) -> dict:
    return {"pipeline": "orders", "run_id": job.run_id, "mode": job.mode, "trigger": "available_now",
            "dry_run": job.dry_run, "status": "succeeded", "started_at": "2026-11-25T10:00:00+00:00",
            "ended_at": "2026-11-25T10:00:05+00:00", "duration_s": 5.0, "sink": "/lake/orders",
            "checkpoint": "/cp/orders", "checkpoint_id": "c1", "batches": 1, "input_rows": 3, "output_rows": 3,
            "delta_version_before": None, "delta_version_after": 1,
            "micro_batches": [{"batch_id": 0, "input_rows": 3, "delta_version": 1, "output_rows": 3,
                               "replay_of_version": None, "bad_records": 0, "quarantined_rows": 0,
                               "dropped_rows": 0, "rescued_rows": 0, "duration_ms": {"triggerExecution": 900},
                               "watermark": None, "sources": [{"description": "FileStreamSource[file:/in]",
                                                               "start_offset": None,
                                                               "end_offset": {"logOffset": 0}, "input_rows": 3,
                                                               "files": ["file:/in/a.json"]}]}],
            "skipped_batches": [], "bad_records": 0, "quarantined_rows": 0, "dropped_rows": 0, "rescued_rows": 0,
            "expectations": {}, "quarantine": "/lake/_quarantine/orders", "airflow": None, "refused": False,
            "error": None, "phases_s": {"session": 4.2, "prepare": 1.0}, **fields}


@pytest.fixture
def plan_for(lake, tmp_path):
    def make(job: JobRequest):
        return build_plan(job, make_spec(orders_spec()), lake, workdir=tmp_path)
    return make


def writes(summary: dict | None, fail: Exception | None = None):
    def submit(plan):
        if summary is not None:
            with open(plan.job.summary_file, "w", encoding="utf-8") as out:
                json.dump(summary, out)
        if fail is not None:
            raise fail
    return submit


def test_a_job_that_succeeded_gives_its_summary_key_for_key(plan_for):
    plan = plan_for(run_job(run_id="r1"))
    written = driver_summary(plan.job)

    summary = launch(plan, contextlib.nullcontext(), writes(written))

    assert isinstance(summary, RunSummary) and summary.succeeded and summary.output_rows == 3
    data = summary.to_json()
    spark_submit = data["phases_s"].pop("spark_submit")
    assert spark_submit >= 0
    assert data == written  # the driver's JSON, key for key, nothing added but the launcher's own phase
    assert list(data) == list(written)  # in its order: the Airflow UI shows an XCom value's first keys
    assert list(data["micro_batches"][0]) == list(written["micro_batches"][0])


def test_a_failed_job_carries_its_summary_and_error(plan_for):
    plan = plan_for(run_job(run_id="r1"))
    failed = driver_summary(plan.job, status="failed", error="boom: a bad batch")

    with pytest.raises(JobFailed) as caught:
        launch(plan, contextlib.nullcontext(), writes(failed, RuntimeError("spark-submit exited with code 1")))

    assert str(caught.value) == "run of orders failed: boom: a bad batch"
    assert caught.value.summary.error == "boom: a bad batch"
    assert str(caught.value.cause) == "spark-submit exited with code 1"


def test_spark_submit_failing_before_any_summary_is_named(plan_for):
    plan = plan_for(maintain_job(run_id="m1"))
    with pytest.raises(JobFailed) as caught:
        launch(plan, contextlib.nullcontext(), writes(None, RuntimeError("spark-submit exited with code 101")))
    assert str(caught.value) == ("spark-submit failed before the maintenance summary was written: "
                                 "spark-submit exited with code 101")
    assert caught.value.summary is None


def test_a_driver_that_wrote_nothing_is_a_failure(plan_for):
    plan = plan_for(run_job(run_id="r1"))
    with pytest.raises(JobFailed, match="^run of orders wrote no run summary; see the Spark output above$"):
        launch(plan, contextlib.nullcontext(), writes(None))


def test_a_busy_pipeline_is_refused_before_spark_submit(plan_for, lake):
    plan = plan_for(run_job(run_id="r2"))
    submitted = []
    with run_lock(lake.checkpoint_root, "orders", {"run_id": "r1"}, dry_run=False):
        with pytest.raises(JobFailed) as caught:
            launch(plan, run_lock(lake.checkpoint_root, "orders", {"run_id": "r2"}, dry_run=False),
                   lambda p: submitted.append(p))
    assert submitted == []
    assert "orders" in str(caught.value) and "r1" in str(caught.value) and caught.value.refused_here
    # the refusal is a run like any other: a summary (refused, no batch) and its row in the ledger
    summary = caught.value.summary.to_json()
    assert (summary["pipeline"], summary["run_id"], summary["mode"], summary["status"], summary["refused"]) == (
        "orders", "r2", "incremental", "failed", True)
    assert summary["error"] == f"refused: {caught.value}"
    assert (summary["batches"], summary["input_rows"], summary["output_rows"]) == (0, 0, 0)
    assert summary["sink"] == str(lake.lake_root / "bronze" / "orders") and summary["ledger"] == str(lake.ledger_path)
    from sluice.operations.ledger import latest_runs

    [row] = latest_runs(str(lake.ledger_path), "orders")
    assert (row["run_id"], row["status"], row["batches"], row["error"]) == ("r2", "failed", 0, summary["error"])


def test_a_refused_job_that_writes_no_ledger_row_still_has_its_summary(lake, tmp_path):
    plan = build_plan(maintain_job(run_id="m1", write_ledger=False), make_spec(orders_spec()), lake,
                      workdir=tmp_path)
    with run_lock(lake.checkpoint_root, "orders", {"run_id": "r1"}, dry_run=False):
        with pytest.raises(JobFailed) as caught:
            launch(plan, run_lock(lake.checkpoint_root, "orders", {"run_id": "m1"}, dry_run=False), lambda p: None)
    summary = caught.value.summary.to_json()
    assert (summary["mode"], summary["refused"], summary["status"]) == ("maintenance", True, "failed")
    assert "ledger" not in summary and not lake.ledger_path.exists()


def test_the_request_file_is_the_drivers_only_argument_and_round_trips(plan_for, tmp_path):
    from datetime import datetime, timezone

    from sluice.contract.request import BackfillSlice

    day = BackfillSlice(datetime(2026, 11, 1, tzinfo=timezone.utc), datetime(2026, 11, 2, tzinfo=timezone.utc))
    plan = plan_for(run_job(run_id="bf", backfill=day, airflow={"dag_id": "d", "dag_run_id": "r", "try_number": 2}))
    assert plan.application_args == ["--request", str(tmp_path / "request.json")]
    job = JobRequest.read(tmp_path / "request.json")
    assert job == plan.job
    assert (job.mode, job.backfill.label, job.airflow.try_number, job.holder()) == (
        "backfill", "2026-11-01..2026-11-01", 2, {"run_id": "bf", "dag_id": "d", "dag_run_id": "r", "try_number": 2})
