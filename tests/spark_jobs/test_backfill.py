"""Backfill runs on real Spark and Delta: one slice of the table rebuilt, the checkpoint untouched, twice the
same table, nothing the stream has not ingested yet."""

from __future__ import annotations

import json
from datetime import date
from pathlib import Path

import pytest

from sluice.contract import run_job
from sluice.contract.request import run_request
from spark_jobs.run.runner import RunFailed, run_pipeline
from tests.helpers import (
    delta_version,
    files_under,
    make_spec,
    new_files_since,
    own_temp_dir,
    tree_digest,
    write_lines,
)

SCHEMA = "id BIGINT, ts TIMESTAMP, amount DOUBLE"


def daily_spec(sql: str = "SELECT id, ts, amount, to_date(ts) AS day FROM source", **extra) -> dict:
    return {
        "name": "daily",
        "source": {"format": "json", "path": "landing/daily", "schema": SCHEMA},
        "transform": {"sql": sql},
        "sink": {"partition_by": ["day"]},
        "backfill": {"column": "day", "path": "landing/daily/dt={{ ds }}"},
        **extra,
    }


def line(i: int, day: int, amount: float | None = None) -> str:
    return json.dumps({"id": i, "ts": f"2026-11-{day:02d}T08:00:00Z", "amount": amount if amount is not None else i})


def land(lake, day: int, name: str, lines: list[str]) -> Path:
    return write_lines(lake.lake_root / "landing" / "daily" / f"dt=2026-11-{day:02d}" / name, lines)


def run(spark, spec, lake, backfill: tuple[str, str] | None = None, dry_run: bool = False) -> dict:
    slice_ = None
    if backfill:
        slice_ = run_request(spec, mode="backfill", backfill_from=backfill[0], backfill_to=backfill[1]).backfill
    options = run_job(trigger="available_now", run_id="bf" if backfill else "inc", write_ledger=False,
                         backfill=slice_, dry_run=dry_run)
    return run_pipeline(spark, spec, lake, options).to_json()


def rows(spark, spec, lake) -> list[tuple]:
    df = spark.read.format("delta").load(spec.sink_path(lake))
    return sorted((r.id, r.amount, r.day) for r in df.collect())


def test_backfill_rebuilds_one_slice_from_what_the_stream_ingested(spark, lake):
    v1 = make_spec(daily_spec())
    for day, ids in ((1, (1, 2, 3)), (2, (4, 5, 6)), (3, (7, 8, 9))):
        land(lake, day, "a.json", [line(i, day) for i in ids])
    run(spark, v1, lake)
    checkpoint = Path(v1.checkpoint_path(lake))
    before = tree_digest(checkpoint)
    # a file lands after the last incremental run: it is the next incremental run's, not the backfill's
    land(lake, 2, "late.json", [line(10, 2)])
    # the fix to rebuild with: amounts were in the wrong unit
    v2 = make_spec(daily_spec("SELECT id, ts, amount * 100 AS amount, to_date(ts) AS day FROM source"))

    summary = run(spark, v2, lake, backfill=("2026-11-02", "2026-11-02"))

    nov = {d: date(2026, 11, d) for d in (1, 2, 3)}
    expected = [(1, 1.0, nov[1]), (2, 2.0, nov[1]), (3, 3.0, nov[1]), (4, 400.0, nov[2]), (5, 500.0, nov[2]),
                (6, 600.0, nov[2]), (7, 7.0, nov[3]), (8, 8.0, nov[3]), (9, 9.0, nov[3])]
    assert rows(spark, v2, lake) == expected
    assert tree_digest(checkpoint) == before  # the checkpoint was only read
    assert summary["mode"] == "backfill" and summary["status"] == "succeeded"
    assert (summary["input_rows"], summary["output_rows"], summary["batches"]) == (3, 3, 0)
    backfill = summary["backfill"]
    assert (backfill["slice"], backfill["column"], backfill["files"], backfill["outside_slice"]) == (
        "2026-11-02..2026-11-02", "day", 1, 0)
    assert backfill["predicate"] == "`day` >= DATE'2026-11-02' AND `day` < DATE'2026-11-03'"

    again = run(spark, v2, lake, backfill=("2026-11-02", "2026-11-02"))
    assert rows(spark, v2, lake) == expected  # the same backfill twice: the same table
    assert again["delta_version_after"] == summary["delta_version_after"] + 1
    assert tree_digest(checkpoint) == before

    incremental = run(spark, v2, lake)  # the late file, once
    assert incremental["output_rows"] == 1
    assert rows(spark, v2, lake) == sorted([*expected, (10, 1000.0, nov[2])])


def test_backfill_quarantines_bad_and_out_of_slice_records_once_per_slice(spark, lake):
    spec = make_spec(daily_spec())
    land(lake, 1, "a.json", [line(1, 1), '{"id": 2, "ts": "2026-11-01T08:00:00Z", "amo', line(3, 1)])
    land(lake, 2, "a.json", [line(4, 2), line(5, 1)])  # 5 is dated the 1st but landed in the 2nd's folder
    first = run(spark, spec, lake)
    assert first["quarantined_rows"] == 1

    summary = run(spark, spec, lake, backfill=("2026-11-01", "2026-11-02"))
    again = run(spark, spec, lake, backfill=("2026-11-01", "2026-11-02"))

    assert (summary["backfill"]["files"], summary["quarantined_rows"], again["quarantined_rows"]) == (2, 1, 1)
    assert [r[0] for r in rows(spark, spec, lake)] == [1, 3, 4, 5]  # 5 is in the 1st's slice, from its own row
    quarantine = spark.read.format("delta").load(spec.quarantine_table_path(lake))
    by_origin = sorted(((r.backfill, r.run_id, r.error) for r in quarantine.collect()), key=str)
    assert by_origin == [
        ("2026-11-01..2026-11-02", "bf", "not a JSON object (malformed, truncated, or not {...})"),
        (None, "inc", "not a JSON object (malformed, truncated, or not {...})"),
    ]
    # the 2nd alone: row 5 of the 2nd's folder is outside the slice, set aside (and the 1st's rows stay)
    only_second = run(spark, spec, lake, backfill=("2026-11-02", "2026-11-02"))
    assert (only_second["backfill"]["outside_slice"], only_second["quarantined_rows"]) == (1, 1)
    assert [r[0] for r in rows(spark, spec, lake)] == [1, 3, 4, 5]


def test_backfill_refusals_change_nothing(spark, lake, monkeypatch, tmp_path):
    spec = make_spec(daily_spec())
    with pytest.raises(RunFailed, match=r"refused: daily has no table yet .*Run it in mode incremental first"):
        run(spark, spec, lake, backfill=("2026-11-01", "2026-11-01"))
    land(lake, 1, "a.json", [line(1, 1)])
    run(spark, spec, lake)
    version = run(spark, spec, lake)["delta_version_after"]

    with pytest.raises(RunFailed, match=r"refused: backfill.path: no folder .*dt=2026-11-05 for the slice "
                                        r"2026-11-05..2026-11-05: nothing to rebuild it from, and the table was not "
                                        r"changed") as missing:
        run(spark, spec, lake, backfill=("2026-11-05", "2026-11-05"))
    assert missing.value.summary.refused is True
    other_column = make_spec(daily_spec(backfill={"column": "when", "path": "landing/daily/dt={{ ds }}"}))
    with pytest.raises(RunFailed, match=r"backfill.column: the sink table .* has no column 'when' \(it has: id, ts, "
                                        r"amount, day\)"):
        run(spark, other_column, lake, backfill=("2026-11-01", "2026-11-01"))
    # a run that did not finish: its planned batch may or may not be in the table
    offsets = Path(spec.checkpoint_path(lake)) / "offsets"
    (offsets / "1").write_text((offsets / "0").read_text())
    with pytest.raises(RunFailed, match=r"the last run of daily did not finish: batch 1 is planned .* but not "
                                        r"committed"):
        run(spark, spec, lake, backfill=("2026-11-01", "2026-11-01"))
    (offsets / "1").unlink()
    roots = [lake.lake_root, lake.checkpoint_root, own_temp_dir(monkeypatch, tmp_path)]
    files_before = files_under(roots)
    assert run(spark, spec, lake, dry_run=True, backfill=("2026-11-01", "2026-11-01"))["output_rows"] == 1
    assert delta_version(spec.sink_path(lake)) == version  # the dry run wrote a scratch clone
    assert new_files_since(roots, files_before) == []  # and removed it: nothing left anywhere


def test_a_backfill_of_a_spec_that_changes_the_table_schema_waits_for_an_incremental_run(spark, lake):
    v1 = make_spec(daily_spec())
    land(lake, 1, "a.json", [json.dumps({"id": 1, "ts": "2026-11-01T08:00:00Z", "amount": 1.0, "coupon": "A"})])
    run(spark, v1, lake)
    v2 = make_spec(daily_spec(sql="SELECT id, ts, amount, to_date(ts) AS day, 'v2' AS version FROM source"))
    with pytest.raises(RunFailed, match=r"^refused: the spec of daily changes its table's schema \(adds column\(s\) "
                                        r"version STRING\): run it in mode incremental first"):
        run(spark, v2, lake, backfill=("2026-11-01", "2026-11-01"))

    assert run(spark, v2, lake)["schema_change"]["applied"] is True  # no new data: the change is made anyway
    run(spark, v2, lake, backfill=("2026-11-01", "2026-11-01"))
    df = spark.read.format("delta").load(v2.sink_path(lake))
    assert [(r.id, r.version) for r in df.collect()] == [(1, "v2")]
