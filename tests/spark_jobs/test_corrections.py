"""Corrections flow down a chain, on real Spark and Delta: a backfill of bronze reaches silver (dedupe, a
stream-static join) and gold (a windowed aggregate in append mode) through each pipeline's next run, each
slice exactly once, nothing outside the slice touched, appends in between flowing down once; a second
identical backfill changes no table; an upstream MERGE or reset rebuilds the downstream table whole.
Every expected table is computed by hand."""

from __future__ import annotations

import json
from datetime import date

import pytest

from sluice.contract import run_job
from sluice.contract.request import run_request
from spark_jobs.corrections.upstream import PENDING_FILE
from spark_jobs.run.runner import run_pipeline
from tests.helpers import make_spec, write_lines, write_spec

BRONZE = {
    "name": "bronze",
    "source": {"format": "json", "path": "landing/orders",
               "schema": "id BIGINT, ts TIMESTAMP, customer STRING, amount DOUBLE"},
    "transform": {"sql": "SELECT id, ts, customer, amount, to_date(ts) AS day FROM source"},
    "sink": {"partition_by": ["day"]},
    "backfill": {"column": "day", "path": "landing/orders/dt={{ ds }}"},
}
SILVER = {
    "name": "silver",
    "schedule": {"asset": "bronze"},
    "source": {"format": "delta", "pipeline": "bronze"},
    "transform": {
        "watermark": {"column": "ts", "delay": "1 day"},
        "dedupe": ["id"],
        "tables": {"regions": {"format": "csv", "path": "REGIONS", "schema": "customer STRING, region STRING",
                               "options": {"header": True}}},
        "sql": "SELECT o.id, o.ts, o.day, o.customer, coalesce(r.region, 'unknown') AS region, o.amount "
               "FROM source o LEFT JOIN regions r ON o.customer = r.customer",
    },
    "sink": {"partition_by": ["day"]},
}
GOLD = {
    "name": "gold",
    "schedule": {"asset": "silver"},
    "source": {"format": "delta", "pipeline": "silver"},
    "transform": {
        "watermark": {"column": "ts", "delay": "1 hour"},
        "sql": "SELECT to_date(window.start) AS day, region, count(*) AS orders, round(sum(amount), 2) AS revenue "
               "FROM source GROUP BY window(ts, '1 day'), region",
    },
}
TIMES_TEN = "SELECT id, ts, customer, amount * 10 AS amount, to_date(ts) AS day FROM source"


def order(i: int, day: int, hour: int, customer: str, amount: float) -> str:
    return json.dumps({"id": i, "ts": f"2026-11-{day:02d}T{hour:02d}:00:00Z", "customer": customer, "amount": amount})


def land(lake, day: int, name: str, lines: list[str]) -> None:
    write_lines(lake.lake_root / "landing" / "orders" / f"dt=2026-11-{day:02d}" / name, lines)


def run(spark, spec, lake, backfill: tuple[str, str] | None = None, dry_run: bool = False) -> dict:
    slice_ = None
    if backfill:
        slice_ = run_request(spec, mode="backfill", backfill_from=backfill[0], backfill_to=backfill[1]).backfill
    return run_pipeline(spark, spec, lake, run_job(trigger="available_now", run_id="t", write_ledger=False,
                                                      backfill=slice_, dry_run=dry_run)).to_json()


def silver_rows(spark, spec, lake) -> list[tuple]:
    df = spark.read.format("delta").load(spec.sink_path(lake))
    return sorted((r.id, r.day.day, r.region, r.amount) for r in df.collect())


def gold_rows(spark, spec, lake) -> list[tuple]:
    df = spark.read.format("delta").load(spec.sink_path(lake))
    return sorted((r.day.day, r.region, r.orders, r.revenue) for r in df.collect())


def d(n: int) -> date:
    return date(2026, 11, n)


@pytest.fixture
def chain(spark, lake, tmp_path):
    regions = tmp_path / "regions.csv"
    regions.write_text("customer,region\nann,north\nbob,south\n", encoding="utf-8")
    silver = json.loads(json.dumps(SILVER).replace("REGIONS", str(regions)))
    for data in (BRONZE, silver, GOLD):
        write_spec(lake.pipelines_dir, data)
    land(lake, 1, "a.json", [order(1, 1, 9, "ann", 10.0), order(2, 1, 10, "bob", 20.0), order(3, 1, 11, "cid", 5.0)])
    land(lake, 2, "a.json", [order(4, 2, 9, "ann", 7.0), order(5, 2, 12, "bob", 3.0)])
    land(lake, 3, "a.json", [order(6, 3, 8, "ann", 1.0)])
    land(lake, 4, "a.json", [order(7, 4, 5, "bob", 2.0)])  # the watermark passes 11-03's window
    specs = make_spec(BRONZE), make_spec(silver), make_spec(GOLD)
    for spec in specs:
        run(spark, spec, lake)
    assert gold_rows(spark, specs[2], lake) == [
        (1, "north", 1, 10.0), (1, "south", 1, 20.0), (1, "unknown", 1, 5.0),
        (2, "north", 1, 7.0), (2, "south", 1, 3.0), (3, "north", 1, 1.0),
    ]
    return specs, regions


@pytest.mark.slow  # a chain of three pipelines, each run several times: not in make test-fast
def test_a_bronze_backfill_flows_down_to_silver_and_gold_and_twice_changes_nothing(spark, lake, chain):
    (bronze, silver, gold), regions = chain
    fixed = make_spec({**BRONZE, "transform": {"sql": TIMES_TEN}})
    summary = run(spark, fixed, lake, backfill=("2026-11-01", "2026-11-02"))
    assert summary["backfill"]["slice"] == "2026-11-01..2026-11-02"
    land(lake, 4, "b.json", [order(8, 4, 6, "ann", 4.0)])  # an append upstream, between backfill and silver
    assert run(spark, fixed, lake)["output_rows"] == 1
    bronze_version = summary["delta_version_after"] + 1

    silver_summary = run(spark, silver, lake)
    assert silver_summary["status"] == "succeeded"
    assert silver_summary["output_rows"] == 1  # the append, once
    follow = silver_summary["upstream_changes"]
    assert follow["action"] == "rebuild" and follow["pipeline"] == "bronze"
    assert [(c["version"], c["kind"], c["slice"]) for c in follow["changes"]] == [
        (summary["delta_version_after"], "slice", "2026-11-01..2026-11-02")]
    [rebuild] = follow["rebuilds"]
    assert (rebuild["slice"], rebuild["column"], rebuild["upstream_version"], rebuild["input_rows"]) == (
        "2026-11-01..2026-11-02", "day", bronze_version, 5)
    assert silver_rows(spark, silver, lake) == [
        (1, 1, "north", 100.0), (2, 1, "south", 200.0), (3, 1, "unknown", 50.0),
        (4, 2, "north", 70.0), (5, 2, "south", 30.0),
        (6, 3, "north", 1.0),  # outside the slice: as it was
        (7, 4, "south", 2.0), (8, 4, "north", 40.0),
    ]
    assert not (lake.checkpoint_root / "silver" / PENDING_FILE).exists()

    gold_summary = run(spark, gold, lake)
    assert gold_summary["upstream_changes"]["rebuilds"][0]["slice"] == "2026-11-01..2026-11-02"
    expected_gold = [
        (1, "north", 1, 100.0), (1, "south", 1, 200.0), (1, "unknown", 1, 50.0),
        (2, "north", 1, 70.0), (2, "south", 1, 30.0), (3, "north", 1, 1.0),
    ]
    assert gold_rows(spark, gold, lake) == expected_gold
    expected_silver = silver_rows(spark, silver, lake)

    # the same backfill again: every table as it was, and nothing to follow twice
    run(spark, fixed, lake, backfill=("2026-11-01", "2026-11-02"))
    for spec in (silver, gold):
        assert run(spark, spec, lake)["upstream_changes"]["action"] == "rebuild"
    assert silver_rows(spark, silver, lake) == expected_silver
    assert gold_rows(spark, gold, lake) == expected_gold
    for spec in (silver, gold):
        assert "upstream_changes" not in run(spark, spec, lake)

    # a pipeline with a Delta source backfilled on its own (a new region for cid): gold follows it too
    regions.write_text("customer,region\nann,north\nbob,south\ncid,west\n", encoding="utf-8")
    silver_bf = make_spec({**json.loads(json.dumps(SILVER).replace("REGIONS", str(regions))),
                           "backfill": {"column": "day"}})
    # a dry run says what it would do and changes nothing
    before = silver_rows(spark, silver, lake)
    dry = run(spark, silver_bf, lake, backfill=("2026-11-01", "2026-11-01"), dry_run=True)
    assert dry["backfill"]["upstream"]["predicate"] == "`day` >= DATE'2026-11-01' AND `day` < DATE'2026-11-02'"
    assert silver_rows(spark, silver, lake) == before

    summary = run(spark, silver_bf, lake, backfill=("2026-11-01", "2026-11-01"))
    assert summary["input_rows"] == 3 and summary["output_rows"] == 3
    assert [r for r in silver_rows(spark, silver, lake) if r[1] == 1] == [
        (1, 1, "north", 100.0), (2, 1, "south", 200.0), (3, 1, "west", 50.0)]
    assert [r for r in silver_rows(spark, silver, lake) if r[1] != 1] == [r for r in before if r[1] != 1]

    dry = run(spark, gold, lake, dry_run=True)  # what gold's next run would rebuild, on a scratch copy
    assert dry["upstream_changes"]["rebuilds"][0]["slice"] == "2026-11-01..2026-11-01"
    assert (1, "west", 1, 50.0) not in gold_rows(spark, gold, lake)
    run(spark, gold, lake)
    assert gold_rows(spark, gold, lake) == [
        (1, "north", 1, 100.0), (1, "south", 1, 200.0), (1, "west", 1, 50.0),
        (2, "north", 1, 70.0), (2, "south", 1, 30.0), (3, "north", 1, 1.0),
    ]


@pytest.mark.slow  # a chain of three pipelines, each run several times: not in make test-fast
def test_a_window_not_written_yet_is_rebuilt_once_written_and_an_upstream_reset_rebuilds_all(spark, lake, chain):
    (bronze, silver, gold), _ = chain
    fixed = make_spec({**BRONZE, "transform": {"sql": TIMES_TEN}})
    run(spark, fixed, lake, backfill=("2026-11-04", "2026-11-04"))  # id 7: 2.0 -> 20.0
    run(spark, silver, lake)
    assert (7, 4, "south", 20.0) in silver_rows(spark, silver, lake)
    summary = run(spark, gold, lake)
    # 11-04's window is still open (the watermark is 11-04 04:00): gold has no row of it to replace yet
    assert summary["upstream_changes"]["deferred"][0]["values"] == ["DATE'2026-11-04'"]
    assert (lake.checkpoint_root / "gold" / PENDING_FILE).exists()
    assert [r for r in gold_rows(spark, gold, lake) if r[0] == 4] == []

    land(lake, 5, "a.json", [order(9, 5, 3, "bob", 5.0)])  # the watermark passes 11-04's window
    for spec in (fixed, silver):
        run(spark, spec, lake)
    summary = run(spark, gold, lake)
    # the stream wrote 11-04 from the state it had (2.0); the deferred rebuild replaced it (20.0) in the same run
    assert summary["upstream_changes"]["rebuilds"][0]["deferred_values"] == ["DATE'2026-11-04'"]
    assert [r for r in gold_rows(spark, gold, lake) if r[0] == 4] == [(4, "south", 1, 20.0)]
    assert not (lake.checkpoint_root / "gold" / PENDING_FILE).exists()
    assert "upstream_changes" not in run(spark, gold, lake)

    # bronze reset (with the fixed transform): silver and gold are rebuilt whole
    run_pipeline(spark, fixed, lake, run_job(trigger="available_now", run_id="r", write_ledger=False, reset=True))
    summary = run(spark, silver, lake)
    assert summary["upstream_changes"]["action"] == "reset"
    assert "changed rows without naming a slice: this table is rebuilt whole" in summary["upstream_changes"]["reason"]
    assert silver_rows(spark, silver, lake) == [
        (1, 1, "north", 100.0), (2, 1, "south", 200.0), (3, 1, "unknown", 50.0), (4, 2, "north", 70.0),
        (5, 2, "south", 30.0), (6, 3, "north", 10.0), (7, 4, "south", 20.0), (9, 5, "south", 50.0)]
    assert run(spark, gold, lake)["upstream_changes"]["action"] == "reset"
    assert gold_rows(spark, gold, lake) == [
        (1, "north", 1, 100.0), (1, "south", 1, 200.0), (1, "unknown", 1, 50.0),
        (2, "north", 1, 70.0), (2, "south", 1, 30.0), (3, "north", 1, 10.0), (4, "south", 1, 20.0),
    ]
