"""A running Airflow (`airflow standalone`: api-server, scheduler, dag-processor, triggerer on SQLite) and
`airflow backfill create` over 2 days: one backfill run per day, each rebuilding its day's slice of the table
with the current spec, serialized by the pipeline lock, the checkpoint untouched. (The REST calls of the UI's
backfill dialog, on a chain whose downstream runs follow the backfill: test_airflow_corrections.)"""

from __future__ import annotations

from datetime import date
from pathlib import Path

import pytest

from sluice.operations.ledger import latest_runs
from tests.e2e.conftest import wait_for
from tests.e2e.live_airflow import Api, airflow, airflow_standalone
from tests.helpers import run_here, tree_digest, write_lines, write_spec
from tests.spark_jobs.test_chain import BRONZE, order


@pytest.fixture
def standalone(lake, tmp_path, airflow_db):
    # only the backfill's runs: no scheduled run of the DAG beside them
    with airflow_standalone(tmp_path, airflow_db, {"AIRFLOW__SCHEDULER__USE_JOB_SCHEDULE": "False"}) as running:
        yield running


def create_backfill_with_the_cli(env, log) -> None:
    """`airflow backfill create` for 2026-11-01..02. On SQLite the CLI's commit can meet the running scheduler's
    ("database is locked", seen in CI runs); the backfill may or may not exist then: ask again only if it does not."""
    def created():
        done = airflow(env, "backfill", "create", "--dag-id", "af_days", "--from-date", "2026-11-01",
                       "--to-date", "2026-11-02")
        if done.returncode == 0:
            return True
        output = done.stdout[-3000:] + done.stderr[-3000:]
        assert "database is locked" in output, output
        return bool((Api(env).poll("/api/v2/backfills?dag_id=af_days") or {}).get("backfills"))

    wait_for("airflow backfill create", created, 300, log, every=2)


def test_airflow_backfill_create_rebuilds_each_day_of_the_range(lake, spark, standalone, tmp_path):
    env, log = standalone
    spec = {**BRONZE, "name": "af_days", "schedule": "@daily",
            "source": {**BRONZE["source"], "path": "landing/days"},
            "transform": {"sql": "SELECT *, to_date(ts) AS day FROM source"},
            "sink": {"partition_by": ["day"]},
            "backfill": {"column": "day", "path": "landing/days/dt={{ ds }}"}}
    spec_path = write_spec(lake.pipelines_dir, spec)
    landing = lake.lake_root / "landing" / "days"
    for day in (1, 2, 3, 4):
        write_lines(landing / f"dt=2026-11-0{day}" / "a.json",
                    [order(day * 10 + i, f"2026-11-0{day}T0{i}:00:00Z", "ann", 1.0) for i in range(3)])
    # the stream ingests all four days (a set-up run, in-process: the backfill runs are the spark-submits here)
    assert run_here(spark, lake, spec_path)["output_rows"] == 12
    checkpoint = Path(lake.checkpoint_root / "af_days")
    before = tree_digest(checkpoint)

    # a fix to the transform, re-applied to two of the days by an Airflow backfill
    write_spec(lake.pipelines_dir, {**spec, "transform": {"sql": "SELECT id, ts, customer, amount * 10 AS amount, "
                                                                 "_rescued, to_date(ts) AS day FROM source"}})
    # polled over the REST API (a CLI start per poll would cost seconds of CPU each); the backfill itself is
    # created with the CLI, the subject of this test
    api = wait_for("the Airflow API server's login", lambda: Api.connect(env), 300, log)
    wait_for("the DAG af_days in the running Airflow",
             lambda: api.poll("/api/v2/dags/af_days", not_yet_codes=(404,)), 300, log, every=2)
    create_backfill_with_the_cli(env, log)

    def finished():
        listed = api.poll("/api/v2/dags/af_days/dagRuns?limit=100", not_yet_codes=(404,))
        runs = [r for r in (listed or {}).get("dag_runs", []) if r["dag_run_id"].startswith("backfill__")]
        return runs if len(runs) == 2 and all(r["state"] in ("success", "failed") for r in runs) else None

    runs = wait_for("2 backfill runs to finish", finished, 900, log, every=3)
    assert sorted(r["state"] for r in runs) == ["success"] * 2, (runs, log.read_text(errors="replace")[-5000:])

    # each run rebuilt its own day with the new transform; days 3 and 4 kept what the stream wrote
    table = spark.read.format("delta").load(str(lake.lake_root / "af_days"))
    assert sorted((r.day, r.amount) for r in table.collect()) == sorted(
        [(date(2026, 11, d), 10.0) for d in (1, 2) for _ in range(3)] + [(date(2026, 11, d), 1.0) for d in (3, 4) for _ in range(3)])
    assert table.count() == 12
    assert tree_digest(checkpoint) == before
    backfills = [r for r in latest_runs(str(lake.ledger_path), "af_days") if r["mode"] == "backfill"]
    assert sorted(r["backfill"] for r in backfills) == [
        "2026-11-01..2026-11-01", "2026-11-02..2026-11-02"]
    assert {r["dag_id"] for r in backfills} == {"af_days"} and all(r["status"] == "succeeded" for r in backfills)
