"""A named table through `sluice run` (spark-submit) and read from outside: a driver halted -- as kill -9 would,
by the chaos tests' fault-injecting file system -- after the sink's Delta commit and before the checkpoint's
commits/0 has registered nothing; the next run (in-process: the halted one is the process this test is about)
registers the name; then a plain PySpark session, started with the settings `sluice catalog conf` prints,
reads ``spark.table("bronze.orders")`` and its quarantine by name, with exactly the rows delta-rs reads from the
folders, and `sluice` commands take the table's name for the pipeline."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from bench.chaos import HALT_ENV, HALT_LINE, chaos_jar, chaos_spark_conf
from sluice.settings import load_settings
from tests.e2e.conftest import BIN
from tests.helpers import orders_spec, run_here, write_orders, write_spec

READER = """
import json, sys
from pyspark.sql import SparkSession

conf = json.loads(sys.argv[1])
builder = SparkSession.builder.master("local[1]").appName("outside-reader").config("spark.sql.shuffle.partitions", "1")
for key, value in conf.items():
    builder = builder.config(key, value)
spark = builder.getOrCreate()
rows = sorted(tuple(r) for r in spark.table("bronze.orders").select("id", "customer", "amount").collect())
bad = [r.raw for r in spark.table("bronze.orders_quarantine").collect()]
print(json.dumps({"rows": rows, "bad": bad}))
"""


def test_a_run_killed_before_registering_leaves_the_name_to_the_next_and_outside_readers_get_the_rows(
        lake, spark, metastore, monkeypatch):
    monkeypatch.setenv("SLUICE_CATALOG_URI", metastore.uri)
    lake = load_settings()
    spec_path = write_spec(lake.pipelines_dir, orders_spec(spark_conf=chaos_spark_conf(),
                                                           sink={"path": "bronze/orders", "table": "bronze.orders"}))
    write_orders(lake.lake_root / "landing" / "orders", "a.json", range(0, 12))
    (lake.lake_root / "landing" / "orders" / "bad.json").write_text('{"id": 77, "amount": "x"\n')
    checkpoint = lake.checkpoint_root / "orders"

    halted = subprocess.run([str(BIN / "sluice"), "run", "orders"], capture_output=True, text=True, timeout=600,
                            stdin=subprocess.DEVNULL,
                            env={**os.environ, "SPARK_DIST_CLASSPATH": str(chaos_jar()),
                                 HALT_ENV: f"^{checkpoint}/commits/\\d+$"})

    assert HALT_LINE in halted.stderr and halted.returncode != 0, halted.stderr[-3000:]
    from deltalake import DeltaTable

    folder = lake.lake_root / "bronze" / "orders"
    assert DeltaTable(str(folder)).version() == 0  # committed, and no name yet
    from spark_jobs.sinks import names

    client = names.connect(spark, metastore.uri)
    try:
        assert names._get_table(client, "bronze", "orders") is None
    finally:
        client.close()

    after = run_here(spark, lake, spec_path, run_id="after-kill")

    assert after["status"] == "succeeded", after["error"]
    assert (after["skipped_batches"], after["output_rows"]) == ([0], 0)
    assert after["catalog"] == {"uri": metastore.uri, "table": "bronze.orders", "action": "created",
                                "quarantine": {"table": "bronze.orders_quarantine", "action": "created"}}

    # outside: a plain PySpark session with the printed settings reads the names
    conf = subprocess.run([str(BIN / "sluice"), "catalog", "conf", "--json"], capture_output=True, text=True,
                          timeout=120, check=True).stdout
    assert json.loads(conf)["spark.hadoop.hive.metastore.uris"] == metastore.uri
    read = subprocess.run([sys.executable, "-c", READER, conf], capture_output=True, text=True, timeout=600,
                          stdin=subprocess.DEVNULL, env={**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"})
    assert read.returncode == 0, read.stderr[-3000:]
    outside = json.loads(read.stdout.strip().splitlines()[-1])
    table = DeltaTable(str(folder)).to_pyarrow_table(columns=["id", "customer", "amount"])
    assert [tuple(r) for r in outside["rows"]] == sorted(zip(*(table[c].to_pylist() for c in table.column_names)))
    assert len(outside["rows"]) == 12 and outside["bad"] == ['{"id": 77, "amount": "x"']

    # the CLI takes the table's name for its pipeline
    status = subprocess.run([str(BIN / "sluice"), "status", "bronze.orders", "--json"], capture_output=True,
                            text=True, timeout=120)
    assert status.returncode == 0, status.stderr
    assert [json.loads(line)["run_id"] for line in status.stdout.splitlines()] == ["after-kill"]
