"""`sluice run A B ...`: one spark-submit, one driver, the pipelines' runs one after another (issue 42's
shared driver, first from the command line). Each pipeline keeps its own lock, checkpoint, table, ledger row
and summary; each runs in a SparkSession of its own over the shared JVM; one that fails, or is refused, fails
alone; a driver killed mid-group loses and duplicates nothing."""

from __future__ import annotations

import json
import os

from bench.chaos import HALT_ENV, HALT_LINE, chaos_jar, chaos_spark_conf
from sluice.operations.ledger import latest_runs
from sluice.storage.lock import launcher_lock
from tests.e2e.conftest import sluice
from tests.helpers import orders_spec, ran_here, write_orders, write_spec


def lines(stdout: str) -> list[dict]:
    return [json.loads(line) for line in stdout.strip().splitlines()]


def ids(spark, table) -> list[int]:
    return sorted(r.id for r in spark.read.format("delta").load(str(table)).select("id").collect())


def group_spec(lake, name: str, **more) -> None:
    write_spec(lake.pipelines_dir, orders_spec(name=name, source={**orders_spec()["source"], "path": f"landing/{name}"},
                                               sink={"path": f"bronze/{name}"}, **more))


def test_one_driver_runs_a_group_each_in_a_session_of_its_own_and_a_failure_or_refusal_fails_alone(lake, spark,
                                                                                                tmp_path):
    regions = tmp_path / "regions.csv"
    regions.write_text("customer,region\nc1,north\nc2,south\n", encoding="utf-8")
    # a lookup table is a temporary view of its run's session; the next pipeline's SQL names it without
    # declaring it: in a session of its own, it does not exist there
    group_spec(lake, "g_lookup", transform={
        "tables": {"regions": {"format": "csv", "path": str(regions), "schema": "customer STRING, region STRING",
                               "options": {"header": True}}},
        "sql": "SELECT s.id, coalesce(r.region, 'none') AS region FROM source s LEFT JOIN regions r "
               "ON s.customer = r.customer"})
    group_spec(lake, "g_leak", transform={"sql": "SELECT s.id FROM source s JOIN regions r ON s.customer = r.customer"})
    group_spec(lake, "g_busy")
    group_spec(lake, "g_plain")
    for name in ("g_lookup", "g_leak", "g_busy", "g_plain"):
        write_orders(lake.lake_root / "landing" / name, "a.json", range(7))
    held = launcher_lock(lake.checkpoint_root, "g_busy", {"run_id": "held_by_the_test"}).acquire()
    try:
        done = sluice("run", "g_lookup", "g_leak", "g_busy", "g_plain")
    finally:
        held.release()
    assert done.returncode == 1, done.stderr[-3000:]
    summaries = lines(done.stdout)  # a line each, in the order named
    assert [(s["pipeline"], s["status"]) for s in summaries] == [
        ("g_lookup", "succeeded"), ("g_leak", "failed"), ("g_busy", "failed"), ("g_plain", "succeeded")]
    lookup, leak, busy, plain = summaries
    assert "regions" in leak["error"] and "cannot be found" in leak["error"], leak["error"]
    assert busy["refused"] is True and "held_by_the_test" in busy["error"], busy["error"]
    assert "shared_driver" not in busy  # refused by the launcher: it never reached the driver
    # one driver for the three that held their locks, a session each
    drivers = [s["shared_driver"] for s in (lookup, leak, plain)]
    assert len({d["app_id"] for d in drivers}) == 1, drivers
    assert [(d["driver"], d["jobs"], d["position"]) for d in drivers] == [("group", 3, 1), ("group", 3, 2),
                                                                         ("group", 3, 3)]
    assert lookup["phases_s"]["session"] > 0 and plain["phases_s"]["session"] == 0  # the JVM started once
    assert (lookup["input_rows"], plain["input_rows"], leak["input_rows"]) == (7, 7, 0)
    rows = spark.read.format("delta").load(lookup["sink"]).collect()
    assert sorted((r.id, r.region) for r in rows) == [(i, {1: "north", 2: "south"}.get(i % 7, "none"))
                                                      for i in range(7)]
    assert ids(spark, plain["sink"]) == list(range(7))
    assert not os.path.exists(os.path.join(leak["sink"], "_delta_log")) or ids(spark, leak["sink"]) == []
    # a ledger row each, as separate runs have
    ledger = str(lake.ledger_path)
    assert {n: [r["status"] for r in latest_runs(ledger, n)] for n in ("g_lookup", "g_leak", "g_busy", "g_plain")} == {
        "g_lookup": ["succeeded"], "g_leak": ["failed"], "g_busy": ["failed"], "g_plain": ["succeeded"]}

    # again with new files: each pipeline's own checkpoint, so only what is new to it
    for name in ("g_lookup", "g_plain"):
        write_orders(lake.lake_root / "landing" / name, "b.json", range(7, 10))
    again = sluice("run", "g_plain", "g_lookup")
    assert again.returncode == 0, again.stderr[-3000:]
    assert [(s["pipeline"], s["input_rows"]) for s in lines(again.stdout)] == [("g_plain", 3), ("g_lookup", 3)]
    assert ids(spark, plain["sink"]) == ids(spark, lookup["sink"]) == list(range(10))


def test_a_group_whose_spark_settings_differ_is_refused_before_anything_runs(lake):
    group_spec(lake, "g_one")
    group_spec(lake, "g_two", spark_conf={"spark.sql.shuffle.partitions": "3"})
    done = sluice("run", "g_one", "g_two")
    assert done.returncode == 2
    assert ("g_one and g_two cannot share a driver: their Spark settings differ (spark.sql.shuffle.partitions); "
            "run them apart") in done.stderr
    assert done.stdout == ""
    assert latest_runs(str(lake.ledger_path), "g_one") == []


def test_a_shared_driver_killed_mid_group_loses_and_duplicates_nothing(lake, spark, monkeypatch):
    for name in ("k_one", "k_two", "k_three"):
        group_spec(lake, name, spark_conf=chaos_spark_conf())
        write_orders(lake.lake_root / "landing" / name, "a.json", range(5))
        write_orders(lake.lake_root / "landing" / name, "b.json", range(5, 9))
    monkeypatch.setenv("SPARK_DIST_CLASSPATH", str(chaos_jar()))
    # the JVM halts (no shutdown hooks, as kill -9) just before k_two's sink commit: k_one is done, k_two's
    # data files are written and not committed, k_three has not started
    monkeypatch.setenv(HALT_ENV, f"^{lake.lake_root}/bronze/k_two/_delta_log/\\d+\\.json$")
    halted = sluice("run", "k_one", "k_two", "k_three")
    assert halted.returncode == 1
    assert HALT_LINE in halted.stderr, halted.stderr[-3000:]
    assert [(s["pipeline"], s["status"]) for s in lines(halted.stdout)] == [("k_one", "succeeded")]
    for name in ("k_two", "k_three"):
        assert f"run of {name} wrote no summary: the shared driver ended before it" in halted.stderr
    # the runs after the halt, in-process (a second group run is the first test's)
    assert [ran_here(spark, lake, name, run_id=f"after-{name}")["input_rows"]
            for name in ("k_one", "k_two", "k_three")] == [0, 9, 9]
    for name in ("k_one", "k_two", "k_three"):  # each record once
        assert ids(spark, lake.lake_root / "bronze" / name) == list(range(9)), name
