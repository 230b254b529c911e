"""`sluice stack` (what `make stack` runs): PostgreSQL, the Airflow 3 services with LocalExecutor, a Spark
standalone master and worker, a Kafka broker, an S3 object store and the catalog's metastore (on the
PostgreSQL) as local processes, the lake and the checkpoints in the store's bucket (as docker-compose.yaml has
them). A pipeline triggered through Airflow's REST API runs its executors on the standalone worker, gives
exactly the table a local[*] run gives, and registers its name: a plain PySpark session started with the
settings `sluice catalog conf` prints reads the table in the bucket by name."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from devservices.kafka_broker import free_port, port_open
from tests.e2e.conftest import BIN, wait_for
from tests.e2e.live_airflow import Api
from tests.helpers import order_lines, orders_spec, write_spec

PORTS = ("POSTGRES", "API", "SPARK_MASTER", "SPARK_MASTER_UI", "SPARK_WORKER_UI", "SCHEDULER_HEALTH", "S3",
         "METASTORE")
READER = """
import json, sys
from pyspark.sql import SparkSession

builder = SparkSession.builder.master("local[1]").config("spark.sql.shuffle.partitions", "1")
for key, value in json.loads(sys.argv[1]).items():
    builder = builder.config(key, value)
spark = builder.getOrCreate()
print(json.dumps(sorted(tuple(r) for r in spark.table("st.orders").select("id", "ts", "customer", "amount")
                        .selectExpr("id", "cast(ts as string)", "customer", "amount").collect())))
"""


def run(env: dict[str, str], *args: str, timeout: int = 900) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN / "sluice"), *args], capture_output=True, text=True, env=env, timeout=timeout,
                          stdin=subprocess.DEVNULL)


@pytest.fixture
def stack(lake, tmp_path):
    # PostgreSQL runs as the user postgres: its folder must be reachable (pytest's tmp_path is root's only)
    home = Path(tempfile.mkdtemp(prefix="sluice-stack-"))
    home.chmod(0o755)
    ports: set[int] = set()
    while len(ports) < len(PORTS) + 3:  # one port per service: two equal picks would move one server elsewhere
        ports.add(free_port())
    kafka, worker_logs, trigger_logs, *stack_ports = sorted(ports)
    env = {**os.environ, "SLUICE_STACK_HOME": str(home), "SLUICE_KAFKA_PORT": str(kafka),
           # Airflow's log servers (8793, 8794 by default): free ones, as another test's Airflow may run beside
           "AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT": str(worker_logs),
           "AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT": str(trigger_logs),
           "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "False",
           "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "5"}
    env.update({f"SLUICE_STACK_{name}_PORT": str(port) for name, port in zip(PORTS, stack_ports)})
    # the cluster's drivers run with Spark's defaults (code generation on): the local run below keeps the
    # suite's interpreted expressions (tests/conftest.py), so the two tables are also the two paths compared
    env.pop("SLUICE_SPARK_CONF", None)
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
    return {"run_id": run_id, "state": state, "summary": api.run_summary(dag_id, run_id)}


def _exports(text: str) -> dict[str, str]:
    """``sluice stack env``'s ``export KEY=value`` lines."""
    return {key: shlex.split(value)[0] if value else "" for key, _, value in
            (line.removeprefix("export ").partition("=") for line in text.splitlines() if line.startswith("export "))}


def _land(store_env: dict[str, str], key: str, lines: list[str]) -> None:
    from sluice.storage.object_store import ObjectStore

    with ObjectStore.from_env(store_env).arrow().open_output_stream(f"lake/lake/landing/orders/{key}") as out:
        out.write(("\n".join(lines) + "\n").encode())


def _orders(store_env: dict[str, str], table: str) -> list[tuple]:
    from deltalake import DeltaTable

    from sluice.storage.object_store import ObjectStore, delta_rs_location

    location, options = delta_rs_location(f"s3a://lake/lake/{table}", ObjectStore.from_env(store_env))
    rows = DeltaTable(location, storage_options=options).to_pyarrow_table(columns=["id", "ts", "customer", "amount"])
    return sorted(zip(*(rows[c].to_pylist() for c in ("id", "ts", "customer", "amount"))))


def test_a_pipeline_runs_on_the_standalone_cluster_with_the_same_results_as_local(lake, stack, tmp_path):
    env, banner, home = stack
    assert f"Spark master spark://127.0.0.1:{env['SLUICE_STACK_SPARK_MASTER_PORT']}" in banner
    assert f"object store http://127.0.0.1:{env['SLUICE_STACK_S3_PORT']} (lake s3a://lake/lake)" in banner
    assert f"catalog thrift://127.0.0.1:{env['SLUICE_STACK_METASTORE_PORT']};" in banner
    status = run(env, "stack", "status")
    assert status.returncode == 0 and status.stdout.count("running") == 10, status.stdout
    # Airflow's metadata DB is the stack's PostgreSQL; the lake and checkpoints are in its object store
    exported = _exports(run(env, "stack", "env").stdout)
    assert exported["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"] == \
        f"postgresql+psycopg2://airflow:airflow@127.0.0.1:{env['SLUICE_STACK_POSTGRES_PORT']}/airflow"
    assert (exported["SLUICE_LAKE_ROOT"], exported["SLUICE_CHECKPOINT_ROOT"]) == ("s3a://lake/lake",
                                                                                 "s3a://lake/checkpoints")
    store_env = {k: v for k, v in exported.items() if k.startswith("AWS_")}
    assert store_env["AWS_ENDPOINT_URL"] == f"http://127.0.0.1:{env['SLUICE_STACK_S3_PORT']}"

    write_spec(lake.pipelines_dir, orders_spec(name="st_orders", sink={"path": "bronze/orders", "table": "st.orders"}))
    _land(store_env, "a.json", order_lines(range(0, 40)))
    _land(store_env, "bad.json", ['{"id": 1000, "amount": "x"'])
    logs = home / "logs"
    api = wait_for("the stack's Airflow API login", lambda: Api.connect(
        {"AIRFLOW__API__PORT": env["SLUICE_STACK_API_PORT"]}, credentials=("admin", "admin")), 120,
        logs / "airflow-api-server.log")
    # the spark-submits are admitted by the sluice pool (two at once, the worker's cores), not by a global cap
    assert api.get("/api/v2/pools/sluice")["slots"] == 2
    assert "AIRFLOW__CORE__PARALLELISM" not in exported
    # the dag-processor parses the new spec: 404 until then
    wait_for("the DAG st_orders", lambda: api.poll("/api/v2/dags/st_orders", not_yet_codes=(404,)), 300,
             logs / "airflow-dag-processor.log", every=3)
    first = trigger_and_wait(api, "st_orders", logs)
    assert first["state"] == "success", first
    _land(store_env, "b.json", order_lines(range(40, 70)))
    _land(store_env, "c.json", order_lines(range(30, 45)))  # redelivered ids: in the table twice, as locally
    second = trigger_and_wait(api, "st_orders", logs)
    assert second["state"] == "success", second
    summaries = [r["summary"] for r in (first, second)]
    assert [(s["input_rows"], s["output_rows"], s["quarantined_rows"]) for s in summaries] == [(41, 40, 1), (45, 45, 0)]
    # the names, in the stack's metastore on its PostgreSQL: registered by the first run, left alone by the second
    catalog = exported["SLUICE_CATALOG_URI"]
    assert catalog == f"thrift://127.0.0.1:{env['SLUICE_STACK_METASTORE_PORT']}"
    assert [(s["catalog"]["table"], s["catalog"]["action"], s["catalog"]["quarantine"]["action"]) for s in summaries] \
        == [("st.orders", "created", "created"), ("st.orders", "unchanged", "unchanged")]
    # the executors ran on the standalone worker: one application folder per run
    apps = sorted((home / "spark-work").glob("app-*"))
    assert len(apps) >= 2, apps

    # the same input through a local[*] run (the same store, no cluster, the suite's interpreted expressions):
    # the same table, row for row
    write_spec(lake.pipelines_dir, orders_spec(name="local_orders", sink={"path": "bronze/local_orders"}))
    local_env = {**os.environ, **store_env, "SLUICE_LAKE_ROOT": "s3a://lake/lake",
                 "SLUICE_CHECKPOINT_ROOT": "s3a://lake/checkpoints"}
    done = run(local_env, "run", "local_orders")
    assert done.returncode == 0, done.stderr[-3000:]
    cluster = _orders(store_env, "bronze/orders")
    assert cluster == _orders(store_env, "bronze/local_orders") and len(cluster) == 85

    # outside: a plain PySpark session with the settings `sluice catalog conf` prints (the stack's environment:
    # its metastore, and S3A's settings for the bucket) reads the table in the bucket by its name
    outside_env = {**os.environ, **exported, "SPARK_LOCAL_IP": "127.0.0.1"}
    conf = run(outside_env, "catalog", "conf", "--json")
    assert conf.returncode == 0, conf.stderr
    assert json.loads(conf.stdout)["spark.hadoop.fs.s3a.endpoint"] == store_env["AWS_ENDPOINT_URL"]
    read = subprocess.run([sys.executable, "-c", READER, conf.stdout], capture_output=True, text=True, timeout=600,
                          env=outside_env, cwd=tmp_path, stdin=subprocess.DEVNULL)
    assert read.returncode == 0, read.stderr[-3000:]
    by_name = [tuple(r) for r in json.loads(read.stdout.strip().splitlines()[-1])]
    assert [(i, c, a) for i, _, c, a in by_name] == [(i, c, a) for i, _, c, a in cluster]

    # make stack-down: every service stops, its ports are free again
    down = run(env, "stack", "down", timeout=300)
    assert down.returncode == 0, down.stderr
    assert all(name in down.stdout for name in ("airflow-scheduler", "postgres", "spark-worker", "kafka", "s3",
                                                "metastore"))
    status = run(env, "stack", "status")
    assert status.returncode == 1 and "running" not in status.stdout
    for name in ("POSTGRES", "API", "SPARK_MASTER", "S3", "METASTORE"):
        assert not port_open(int(env[f"SLUICE_STACK_{name}_PORT"])), name
