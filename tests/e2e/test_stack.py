"""`sluice stack` (what `make stack` runs): PostgreSQL, the Airflow 3 services with LocalExecutor, a Spark
standalone master and worker and a Kafka broker as local processes. A pipeline triggered through Airflow's
REST API runs its executors on the standalone worker and gives exactly the table a local[*] run gives."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from sluice.kafka_broker import free_port, port_open
from tests.e2e.conftest import BIN, wait_for
from tests.e2e.live_airflow import Api
from tests.helpers import orders_spec, write_lines, write_orders, write_spec

PORTS = ("POSTGRES", "API", "SPARK_MASTER", "SPARK_MASTER_UI", "SPARK_WORKER_UI", "SCHEDULER_HEALTH")


def run(env: dict[str, str], *args: str, timeout: int = 900) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN / "sluice"), *args], capture_output=True, text=True, env=env, timeout=timeout,
                          stdin=subprocess.DEVNULL)


@pytest.fixture
def stack(lake, tmp_path):
    # PostgreSQL runs as the user postgres: its folder must be reachable (pytest's tmp_path is root's only)
    home = Path(tempfile.mkdtemp(prefix="sluice-stack-"))
    home.chmod(0o755)
    env = {**os.environ, "SLUICE_STACK_HOME": str(home), "SLUICE_KAFKA_PORT": str(free_port()),
           "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "False",
           "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "5"}
    env.update({f"SLUICE_STACK_{name}_PORT": str(free_port()) for name in PORTS})
    try:
        up = run(env, "stack", "up")
        assert up.returncode == 0, up.stdout + up.stderr[-4000:] + _tails(home / "logs")
        yield env, up.stdout, home
    finally:
        down = run(env, "stack", "down", timeout=300)
        shutil.rmtree(home, ignore_errors=True)
        assert down.returncode == 0, down.stderr[-3000:]


def _tails(logs: Path) -> str:
    return "".join(f"\n--- {p.name}\n{p.read_text(errors='replace')[-1500:]}" for p in sorted(logs.glob("*.log")))


def trigger_and_wait(api: Api, dag_id: str, logs: Path, timeout: float = 600) -> dict:
    run_id = api.post(f"/api/v2/dags/{dag_id}/dagRuns", {"logical_date": None, "conf": {}})["dag_run_id"]

    def finished_state() -> str | None:
        run = api.poll(f"/api/v2/dags/{dag_id}/dagRuns/{run_id}")
        return run["state"] if run and run["state"] in ("success", "failed") else None

    state = wait_for(f"{dag_id} run {run_id} to finish", finished_state, timeout, logs / "airflow-scheduler.log",
                     every=3)
    return {"run_id": run_id, "state": state,
            "summary": api.get(f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances/ingest/xcomEntries/"
                               "return_value")["value"]}


def test_a_pipeline_runs_on_the_standalone_cluster_with_the_same_results_as_local(lake, spark, stack, tmp_path):
    env, banner, home = stack
    assert f"Spark master spark://127.0.0.1:{env['SLUICE_STACK_SPARK_MASTER_PORT']}" in banner
    status = run(env, "stack", "status")
    assert status.returncode == 0 and status.stdout.count("running") == 8, status.stdout
    # Airflow's metadata DB is the stack's PostgreSQL
    conn = run(env, "stack", "env").stdout
    assert f"postgresql+psycopg2://airflow:airflow@127.0.0.1:{env['SLUICE_STACK_POSTGRES_PORT']}/airflow" in conn

    write_spec(lake.pipelines_dir, orders_spec(name="st_orders"))
    landing = lake.lake_root / "landing" / "orders"
    write_orders(landing, "a.json", range(0, 40))
    write_lines(landing / "bad.json", ['{"id": 1000, "amount": "x"'])
    logs = home / "logs"
    api = wait_for("the stack's Airflow API login", lambda: Api.connect(
        {"AIRFLOW__API__PORT": env["SLUICE_STACK_API_PORT"]}, credentials=("admin", "admin")), 120,
        logs / "airflow-api-server.log")
    # the dag-processor parses the new spec: 404 until then
    wait_for("the DAG st_orders", lambda: api.poll("/api/v2/dags/st_orders", not_yet_codes=(404,)), 300,
             logs / "airflow-dag-processor.log", every=3)
    first = trigger_and_wait(api, "st_orders", logs)
    assert first["state"] == "success", first
    write_orders(landing, "b.json", range(40, 70))
    write_orders(landing, "c.json", range(30, 45))  # redelivered ids: in the table twice, as in a local run
    second = trigger_and_wait(api, "st_orders", logs)
    assert second["state"] == "success", second
    summaries = [json.loads(r["summary"]) if isinstance(r["summary"], str) else r["summary"] for r in (first, second)]
    assert [(s["input_rows"], s["output_rows"], s["quarantined_rows"]) for s in summaries] == [(41, 40, 1), (45, 45, 0)]
    # the executors ran on the standalone worker: one application folder per run
    apps = sorted((home / "spark-work").glob("app-*"))
    assert len(apps) >= 2, apps

    # the same input through a local[*] run: the same table, row for row
    write_spec(lake.pipelines_dir, orders_spec(name="local_orders", sink={"path": "bronze/local_orders"}))
    local_env = {k: v for k, v in os.environ.items()}
    done = run(local_env, "run", "local_orders")
    assert done.returncode == 0, done.stderr[-3000:]
    cluster = spark.read.format("delta").load(str(lake.lake_root / "bronze" / "orders"))
    local = spark.read.format("delta").load(str(lake.lake_root / "bronze" / "local_orders"))
    columns = ["id", "ts", "customer", "amount"]
    assert sorted(map(tuple, cluster.select(columns).collect())) == sorted(map(tuple, local.select(columns).collect()))
    assert cluster.count() == 85

    # make stack-down: every service stops, its ports are free again
    down = run(env, "stack", "down", timeout=300)
    assert down.returncode == 0, down.stderr
    assert all(name in down.stdout for name in ("airflow-scheduler", "postgres", "spark-worker", "kafka"))
    status = run(env, "stack", "status")
    assert status.returncode == 1 and "running" not in status.stdout
    for name in ("POSTGRES", "API", "SPARK_MASTER"):
        assert not port_open(int(env[f"SLUICE_STACK_{name}_PORT"])), name
