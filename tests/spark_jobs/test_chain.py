"""Chained pipelines on real Spark and Delta: bronze -> silver (delta source, dedupe within the watermark,
stream-static join) -> gold (windowed aggregate, watermark, append), each exactly once with its own
checkpoint. The gold table is checked against numbers computed by hand."""

from __future__ import annotations

import json
from datetime import datetime

import pytest

from sluice.contract import run_job
from spark_jobs.run.runner import RunFailed, run_pipeline
from tests.helpers import make_spec, write_lines, write_spec

BRONZE = {
    "name": "bronze",
    "source": {"format": "json", "path": "landing/orders", "schema": "id BIGINT, ts TIMESTAMP, customer STRING, "
                                                                      "amount DOUBLE"},
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
        "sql": "SELECT o.id, o.ts, o.customer, coalesce(r.region, 'unknown') AS region, o.amount "
               "FROM source o LEFT JOIN regions r ON o.customer = r.customer",
    },
}
GOLD = {
    "name": "gold",
    "schedule": {"asset": "silver"},
    "source": {"format": "delta", "pipeline": "silver"},
    "transform": {
        "watermark": {"column": "ts", "delay": "1 hour"},
        "sql": "SELECT window.start AS day, region, count(*) AS orders, sum(amount) AS revenue "
               "FROM source GROUP BY window(ts, '1 day'), region",
    },
}


def order(i: int, ts: str, customer: str, amount: float) -> str:
    return json.dumps({"id": i, "ts": ts, "customer": customer, "amount": amount})


def run(spark, spec, lake) -> dict:
    return run_pipeline(spark, spec, lake, run_job(trigger="available_now", run_id="t", write_ledger=False)).to_json()


def rows(spark, spec, lake) -> list[tuple]:
    df = spark.read.format("delta").load(spec.sink_path(lake))
    return sorted(tuple(r) for r in df.collect())


@pytest.fixture
def chain(lake, tmp_path):
    regions = tmp_path / "regions.csv"
    regions.write_text("customer,region\nann,north\nbob,south\n", encoding="utf-8")
    silver = json.loads(json.dumps(SILVER).replace("REGIONS", str(regions)))
    for data in (BRONZE, silver, GOLD):
        write_spec(lake.pipelines_dir, data)
    return make_spec(BRONZE), make_spec(silver), make_spec(GOLD)


def test_bronze_silver_gold_exactly_once_with_hand_computed_gold(spark, lake, chain):
    bronze, silver, gold = chain
    landing = lake.lake_root / "landing" / "orders"
    write_lines(landing / "day1.json", [
        order(1, "2026-11-01T09:00:00Z", "ann", 10.0),
        order(2, "2026-11-01T10:00:00Z", "bob", 20.0),
        order(3, "2026-11-01T11:00:00Z", "cid", 5.0),  # no region: 'unknown'
    ])
    write_lines(landing / "day1-redelivered.json", [order(2, "2026-11-01T10:00:00Z", "bob", 20.0)])
    for spec in chain:
        run(spark, spec, lake)
    assert [r[0] for r in rows(spark, bronze, lake)] == [1, 2, 2, 3]  # bronze keeps what landed
    assert [(r[0], r[3]) for r in rows(spark, silver, lake)] == [(1, "north"), (2, "south"), (3, "unknown")]
    assert rows(spark, gold, lake) == []  # the watermark (latest ts - 1 hour) has not passed the day's end

    write_lines(landing / "day2.json", [
        order(4, "2026-11-02T08:00:00Z", "ann", 7.5),
        order(1, "2026-11-01T09:00:00Z", "ann", 10.0),  # a late copy, within silver's 1-day dedupe delay
        order(5, "2026-11-02T23:30:00Z", "bob", 1.0),
    ])
    for spec in chain:
        run(spark, spec, lake)
    assert [r[0] for r in rows(spark, silver, lake)] == [1, 2, 3, 4, 5]
    # day 1, by hand: north 1 order 10.0; south 1 order 20.0 (the copy of 2 dropped); unknown 1 order 5.0
    day1 = datetime(2026, 11, 1)
    assert rows(spark, gold, lake) == [(day1, "north", 1, 10.0), (day1, "south", 1, 20.0), (day1, "unknown", 1, 5.0)]

    again = [run(spark, spec, lake) for spec in chain]  # nothing new anywhere: nothing written
    assert [s["output_rows"] for s in again] == [0, 0, 0]
    assert rows(spark, gold, lake) == [(day1, "north", 1, 10.0), (day1, "south", 1, 20.0), (day1, "unknown", 1, 5.0)]


def test_a_delta_source_before_its_upstream_ran_says_which_pipeline_to_run(spark, lake, chain):
    _, silver, _ = chain
    with pytest.raises(RunFailed, match=r"source: the Delta table .*/bronze does not exist yet: run pipeline bronze "
                                        r"first"):
        run(spark, silver, lake)


def test_an_upstream_merge_rebuilds_the_downstream_table_whole_unless_its_change_commits_are_skipped(spark, lake):
    up = {"name": "up", "source": {"format": "json", "path": "landing/up", "schema": "id BIGINT, v STRING"},
          "sink": {"mode": "merge", "keys": ["id"]}}
    down = {"name": "down", "source": {"format": "delta", "pipeline": "up"}}
    for data in (up, down):
        write_spec(lake.pipelines_dir, data)
    landing = lake.lake_root / "landing" / "up"
    write_lines(landing / "a.json", ['{"id": 1, "v": "a"}', '{"id": 2, "v": "b"}'])
    run(spark, make_spec(up), lake)
    assert run(spark, make_spec(down), lake)["output_rows"] == 2

    write_lines(landing / "b.json", ['{"id": 2, "v": "b2"}', '{"id": 3, "v": "c"}'])  # an update: a change commit
    merged = run(spark, make_spec(up), lake)["delta_version_after"]
    summary = run(spark, make_spec(down), lake)
    follow = summary["upstream_changes"]
    assert (follow["action"], [(c["version"], c["operation"], c["kind"]) for c in follow["changes"]]) == (
        "reset", [(merged, "MERGE", "other")])
    assert follow["reason"] == (f"upstream version {merged} (MERGE) changed rows without naming a slice: this table "
                                "is rebuilt whole from the upstream one")
    # the old checkpoint set aside (only the latest of those a MERGE upstream makes is kept), a new one started
    assert ".followed-" in summary["replaced_checkpoint"]
    assert [(r[0], r[1]) for r in rows(spark, make_spec(down), lake)] == [(1, "a"), (2, "b2"), (3, "c")]
    assert "upstream_changes" not in run(spark, make_spec(down), lake)

    # skip_change_commits: a MERGE commit is skipped whole (its update AND its insert of id 5); appends flow
    skipping = make_spec({**down, "source": {**down["source"], "skip_change_commits": True}})
    write_lines(landing / "c.json", ['{"id": 1, "v": "a2"}', '{"id": 5, "v": "e"}'])
    run(spark, make_spec(up), lake)
    write_lines(landing / "d.json", ['{"id": 4, "v": "d"}'])  # inserts only: an append commit
    run(spark, make_spec(up), lake)
    assert "upstream_changes" not in run(spark, skipping, lake)
    assert [(r[0], r[1]) for r in rows(spark, skipping, lake)] == [(1, "a"), (2, "b2"), (3, "c"), (4, "d")]
