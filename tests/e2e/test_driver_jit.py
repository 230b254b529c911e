"""``SLUICE_DRIVER_JIT=auto`` (the default): an incremental run of a pipeline that ran before starts its driver
with HotSpot's optimizing compiler (C2) held back, and releases it before any batch when the run proves large
(spark_jobs/driver/jit.py, jvm/files Compilers); a first run starts with C2. The run summary's ``driver_jit``
says which, as the driver's JVM has it."""

from __future__ import annotations

from tests.e2e.conftest import run_summary as run
from tests.helpers import (
    kafka_spec,
    new_topic,
    orders_spec,
    produce,
    write_orders,
    write_spec,
)


def jit(summary: dict) -> tuple:
    found = summary["driver_jit"]
    return summary["input_rows"], found["mode"], found["optimizing_compiler"], found["released_because"]


def test_c2_is_held_for_a_small_run_and_released_before_the_batch_of_a_large_one(lake, monkeypatch):
    monkeypatch.delenv("SLUICE_DRIVER_JIT", raising=False)
    landing = lake.lake_root / "landing" / "orders"
    write_orders(landing, "a.json", range(5))
    write_spec(lake.pipelines_dir, orders_spec())  # sluice's discovery: its first listing weighs the new files
    assert jit(run("orders")) == (5, "auto", "on", None)  # a first run reads all that waited: C2 from the start

    write_orders(landing, "b.json", range(5, 7))
    assert jit(run("orders")) == (2, "auto", "held", None)  # 2 new rows: C2 never ran

    # the same pipeline where 1 byte counts as large: released by the source's first listing, which weighed
    # exactly the run's new files (not those ingested before)
    write_spec(lake.pipelines_dir, orders_spec(spark_conf={"spark.sluice.jit.fullBytes": 1}))
    size = write_orders(landing, "c.json", range(7, 10)).stat().st_size
    assert jit(run("orders")) == (3, "auto", "released", f"new files of {size} bytes (at least 1)")

    # Spark's own file source (discovery: spark): weighed by the backlog measured before the query
    listed = orders_spec(name="listed", sink={"path": "bronze/listed"}, spark_conf={"spark.sluice.jit.fullBytes": 1},
                         source={**orders_spec()["source"], "path": "landing/listed", "discovery": "spark"})
    write_spec(lake.pipelines_dir, listed)
    write_orders(lake.lake_root / "landing" / "listed", "a.json", range(2))
    assert jit(run("listed"))[:3] == (2, "auto", "on")
    size = write_orders(lake.lake_root / "landing" / "listed", "b.json", range(2, 5)).stat().st_size
    assert jit(run("listed")) == (3, "auto", "released", f"new files of {size} bytes (at least 1)")


def test_a_kafka_run_releases_c2_once_its_brokers_said_its_backlog_is_large(lake, kafka_broker, monkeypatch):
    monkeypatch.delenv("SLUICE_DRIVER_JIT", raising=False)
    servers = kafka_broker.bootstrap_servers
    topic = new_topic(servers)
    produce(servers, topic, range(3))
    spec = kafka_spec("kjit", servers, topic)
    write_spec(lake.pipelines_dir, spec)
    assert jit(run("kjit")) == (3, "auto", "on", None)  # a first run

    produce(servers, topic, range(3, 5))
    assert jit(run("kjit")) == (2, "auto", "held", None)  # 2 records wait: fewer than 500,000

    write_spec(lake.pipelines_dir, {**spec, "spark_conf": {"spark.sluice.jit.fullRecords": 3}})
    produce(servers, topic, range(5, 8))
    assert jit(run("kjit")) == (3, "auto", "released", "a Kafka backlog of 3 records (at least 3)")
