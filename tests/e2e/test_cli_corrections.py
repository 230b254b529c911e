"""Corrections flow down through the CLI alone: `sluice run --backfill-from/--backfill-to` on bronze with a fixed
transform, then `sluice run` on silver -- killed (JVM halted, as kill -9) right before its rebuild's Delta commit,
and again right before its marker is cleared. Every table is checked against values computed by hand: each order
once, the slice corrected, nothing outside it changed. (The runs after the halts -- silver's, then gold's, which
only follows silver's rebuild -- are made in-process: the processes this test is about are the CLI backfill and
the halted runs.)"""

from __future__ import annotations

import json

from bench.chaos import HALT_DELETE_ENV, HALT_ENV, chaos_jar, chaos_spark_conf
from sluice.storage.delta_log import log_state
from tests.e2e.conftest import last_json_line, sluice
from tests.helpers import ran_here, write_spec
from tests.spark_jobs.test_corrections import (
    BRONZE,
    GOLD,
    SILVER,
    TIMES_TEN,
    land,
    order,
)


def halted(monkeypatch, env: str, pattern: str, *args: str) -> None:
    monkeypatch.setenv(env, pattern)
    done = sluice("run", *args)
    monkeypatch.delenv(env)
    assert done.returncode == 1, done.stderr[-3000:]
    assert "sluice chaos: halting the JVM before" in done.stderr, done.stderr[-3000:]


def test_a_cli_backfill_reaches_silver_and_gold_exactly_once_across_kills(lake, spark, monkeypatch, tmp_path):
    monkeypatch.setenv("SPARK_DIST_CLASSPATH", str(chaos_jar()))
    regions = tmp_path / "regions.csv"
    regions.write_text("customer,region\nann,north\nbob,south\n", encoding="utf-8")
    silver = {**json.loads(json.dumps(SILVER).replace("REGIONS", str(regions))), "spark_conf": chaos_spark_conf()}
    for data in (BRONZE, silver, GOLD):
        write_spec(lake.pipelines_dir, data)
    land(lake, 1, "a.json", [order(1, 1, 9, "ann", 10.0), order(2, 1, 10, "bob", 20.0)])
    land(lake, 2, "a.json", [order(3, 2, 9, "ann", 7.0)])
    land(lake, 3, "a.json", [order(4, 3, 5, "bob", 2.0)])  # the watermark passes 11-02's window
    for name in ("bronze", "silver", "gold"):  # the set-up runs, in-process: the CLI's runs are the ones below
        ran_here(spark, lake, name, run_id=f"set-up-{name}")

    write_spec(lake.pipelines_dir, {**BRONZE, "transform": {"sql": TIMES_TEN}})
    done = sluice("run", "bronze", "--backfill-from", "2026-11-01", "--backfill-to", "2026-11-02")
    assert done.returncode == 0, done.stderr[-3000:]
    assert last_json_line(done.stdout)["backfill"]["slice"] == "2026-11-01..2026-11-02"

    # silver: its stream commits an empty batch (the change skipped), then the rebuild commits: halt before that
    table = lake.lake_root / "silver"
    rebuild_commit = log_state(str(table))["version"] + 2
    halted(monkeypatch, HALT_ENV, rf"silver/_delta_log/0*{rebuild_commit}\.json$", "silver")
    assert log_state(str(table))["version"] == rebuild_commit - 1
    # again, halted after the rebuild's commit, before the marker that names the pending change is cleared
    halted(monkeypatch, HALT_DELETE_ENV, r"silver/sluice_upstream_pending$", "silver")
    assert log_state(str(table))["version"] == rebuild_commit
    after = ran_here(spark, lake, "silver", run_id="after-halts")  # the run after the halts, in-process
    assert "upstream_changes" not in after  # the rebuild was done once, by the halted run
    silver_rows = sorted((r.id, r.day.day, r.region, r.amount)
                         for r in spark.read.format("delta").load(str(table)).collect())
    assert silver_rows == [(1, 1, "north", 100.0), (2, 1, "south", 200.0), (3, 2, "north", 70.0), (4, 3, "south", 2.0)]

    follow = ran_here(spark, lake, "gold", run_id="after-gold")["upstream_changes"]  # gold follows, in-process
    assert (follow["pipeline"], follow["action"], [r["slice"] for r in follow["rebuilds"]]) == (
        "silver", "rebuild", ["2026-11-01..2026-11-02"])
    gold = spark.read.format("delta").load(str(lake.lake_root / "gold"))
    assert sorted((r.day.day, r.region, r.orders, r.revenue) for r in gold.collect()) == [
        (1, "north", 1, 100.0), (1, "south", 1, 200.0), (2, "north", 1, 70.0)]
