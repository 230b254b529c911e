"""A file source without ``source.schema`` on real Spark and Delta (sluice issue 23, part 1): the first run
infers the schema from a sample and stores it as ``schemas/0`` in the checkpoint; later runs read with the
stored version, never a new inference; csv stays text unless hinted; ``add_columns`` stores the next
version and the ledger records the version each run used; a dry run shows the schema and stores nothing."""

from __future__ import annotations

import json
from datetime import datetime
from decimal import Decimal

import pytest

from sluice.contract import run_job
from sluice.operations.ledger import latest_runs
from sluice.schema.stored import SchemaVersion
from sluice.storage.checkpoint import Checkpoint
from spark_jobs.run.runner import RunFailed, run_pipeline
from spark_jobs.sources.inference import InferenceError, infer, source_schema
from tests.helpers import make_spec, write_lines


def run(spark, spec, lake, **options) -> dict:
    return run_pipeline(spark, spec, lake, run_job(trigger="available_now", run_id=options.pop("run_id", "t"),
                                                      write_ledger=options.pop("write_ledger", False),
                                                      **options)).to_json()


def pipeline(fmt: str = "json", **source) -> dict:
    return {"name": "sales", "source": {"format": fmt, "path": "landing/sales", **source},
            "sink": {"path": "bronze/sales"}}


def land(lake, name: str, *lines: str) -> str:
    return str(write_lines(lake.lake_root / "landing" / "sales" / name, list(lines)))


def stored(lake, version: int) -> dict:
    return json.loads((lake.checkpoint_root / "sales" / "schemas" / str(version)).read_text())


def rows(spark, spec, lake) -> list[tuple]:
    return sorted(tuple(r) for r in spark.read.format("delta").load(spec.sink_path(lake)).collect())


def types(spark, spec, lake) -> dict[str, str]:
    table = spark.read.format("delta").load(spec.sink_path(lake))
    return {f.name: f.dataType.simpleString() for f in table.schema.fields}


def test_json_is_inferred_once_and_later_runs_read_with_the_stored_schema(spark, lake):
    spec = make_spec(pipeline())
    first = land(lake, "1.json", json.dumps({"id": 1, "name": "ann", "amount": 1.5, "tags": ["x"]}),
                 json.dumps({"id": 2, "name": "bob", "amount": 2.0}))
    summary = run(spark, spec, lake, run_id="run-1")

    ddl = "amount DOUBLE, id BIGINT, name STRING, tags ARRAY<STRING>"
    assert summary["status"] == "succeeded" and summary["output_rows"] == 2
    assert (summary["schema_version"], summary["schema_inferred"]) == (
        0, {"version": 0, "ddl": ddl, "files": [first], "hints": None, "stored": True})
    record = stored(lake, 0)
    assert {k: record[k] for k in ("version", "ddl", "run_id", "reason", "files", "hints")} == {
        "version": 0, "ddl": ddl, "run_id": "run-1", "reason": "inferred", "files": [first], "hints": None}

    # a file that alone would infer name and amount as BIGINT, and has a field the schema does not declare
    land(lake, "2.json", json.dumps({"id": 3, "name": 5, "amount": 3, "coupon": "C"}))
    summary = run(spark, spec, lake, run_id="run-2")
    assert (summary["status"], summary["output_rows"], summary["schema_version"]) == ("succeeded", 1, 0)
    assert "schema_inferred" not in summary and "schema_versions_added" not in summary
    assert Checkpoint(spec.checkpoint_path(lake)).schema_versions() == [0]
    assert types(spark, spec, lake) == {"amount": "double", "id": "bigint", "name": "string",
                                        "tags": "array<string>", "_rescued": "string"}
    assert rows(spark, spec, lake) == [(1.5, 1, "ann", ["x"], None), (2.0, 2, "bob", None, None),
                                       (3.0, 3, "5", None, '{"coupon":"C"}')]


def test_csv_stays_text_unless_hinted_and_hints_fix_types(spark, lake):
    spec = make_spec(pipeline("csv", options={"header": True}, schema_hints="amount DECIMAL(12,2), ts TIMESTAMP"))
    land(lake, "1.csv", "zip,amount,ts,city", "02134,12.50,2026-11-01 10:00:00,Boston",
         "00501,7,2026-11-02 11:30:00,Holtsville")
    summary = run(spark, spec, lake)

    ddl = "zip STRING, amount DECIMAL(12,2), ts TIMESTAMP, city STRING"
    assert (summary["status"], summary["output_rows"], summary["schema_inferred"]["ddl"]) == ("succeeded", 2, ddl)
    assert stored(lake, 0)["hints"] == "amount DECIMAL(12,2), ts TIMESTAMP"
    assert types(spark, spec, lake) == {"zip": "string", "amount": "decimal(12,2)", "ts": "timestamp",
                                        "city": "string"}
    assert rows(spark, spec, lake) == [
        ("00501", Decimal("7.00"), datetime(2026, 11, 2, 11, 30), "Holtsville"),
        ("02134", Decimal("12.50"), datetime(2026, 11, 1, 10, 0), "Boston")]

    # inferred types are an opt-in: the zip code becomes a number, its leading zero lost
    opted = make_spec(pipeline("csv", options={"header": True, "inferSchema": True}))
    assert infer(spark, opted, lake, "t").ddl == "zip INT, amount DOUBLE, ts TIMESTAMP, city STRING"
    # a hint cannot add a csv column: values are matched to columns by position
    added = make_spec(pipeline("csv", options={"header": True}, schema_hints="country STRING"))
    with pytest.raises(InferenceError, match=(
            r"source.schema_hints: column\(s\) country are not in the csv files sampled in .*landing/sales "
            r"\(columns: zip, amount, ts, city\); csv values are matched to columns by position")):
        infer(spark, added, lake, "t")


def test_the_sample_is_the_oldest_files_within_the_bounds(spark, lake):
    import os

    names = [land(lake, f"{n}.json", json.dumps({"id": n, f"only_in_{n}": n})) for n in (1, 2, 3)]
    for age, name in zip((30, 20, 10), names):  # 1.json the oldest
        os.utime(name, (1_700_000_000 - age, 1_700_000_000 - age))
    inferred = infer(spark, make_spec(pipeline(inference={"max_files": 2})), lake, "t")
    assert (inferred.files, inferred.ddl) == (names[:2], "id BIGINT, only_in_1 BIGINT, only_in_2 BIGINT")
    inferred = infer(spark, make_spec(pipeline(inference={"max_bytes": 1})), lake, "t")  # one file at least
    assert (inferred.files, inferred.ddl) == (names[:1], "id BIGINT, only_in_1 BIGINT")


def test_add_columns_stores_the_next_version_and_the_ledger_records_the_version_used(spark, lake):
    spec = make_spec({**pipeline(), "schema_evolution": "add_columns"})
    land(lake, "1.json", json.dumps({"id": 1}))
    assert run(spark, spec, lake, run_id="r1", write_ledger=True)["schema_version"] == 0

    land(lake, "2.json", json.dumps({"id": 2, "coupon": "A"}))
    summary = run(spark, spec, lake, run_id="r2", write_ledger=True)
    assert (summary["status"], summary["schema_version"], summary["schema_versions_added"],
            summary["added_columns"]) == ("succeeded", 0, [1], ["coupon"])
    record = stored(lake, 1)
    assert {k: record[k] for k in ("version", "ddl", "run_id", "reason", "added_columns", "batch_id")} == {
        "version": 1, "ddl": "id BIGINT, coupon STRING", "run_id": "r2", "reason": "add_columns",
        "added_columns": ["coupon"], "batch_id": 1}

    # the next run parses coupon as a declared column: nothing rescued, no new version
    land(lake, "3.json", json.dumps({"id": 3, "coupon": "B"}))
    summary = run(spark, spec, lake, run_id="r3", write_ledger=True)
    assert (summary["status"], summary["schema_version"], summary["rescued_rows"]) == ("succeeded", 1, 0)
    assert "schema_versions_added" not in summary
    assert rows(spark, spec, lake) == [(1, None), (2, "A"), (3, "B")]
    ledger = latest_runs(str(lake.ledger_path), "sales")
    assert [(r["run_id"], r["schema_version"]) for r in ledger] == [("r3", 1), ("r2", 0), ("r1", 0)]


def test_a_dry_run_of_a_first_run_shows_the_schema_and_stores_nothing(spark, lake):
    # json hints may add a column the sample does not have: records fill it when they hold it
    spec = make_spec(pipeline(schema_hints="amount DECIMAL(12,2), ts TIMESTAMP"))
    first = land(lake, "1.json", json.dumps({"id": 1, "amount": 9.99}))
    summary = run(spark, spec, lake, dry_run=True)

    assert (summary["status"], summary["dry_run"], summary["input_rows"], summary["schema_version"]) == (
        "succeeded", True, 1, 0)
    assert summary["schema_inferred"] == {"version": 0, "ddl": "amount DECIMAL(12,2), id BIGINT, ts TIMESTAMP",
                                          "files": [first], "hints": "amount DECIMAL(12,2), ts TIMESTAMP",
                                          "stored": False}
    assert not (lake.checkpoint_root / "sales").exists()
    assert not (lake.lake_root / "bronze" / "sales").exists()


def test_no_files_to_infer_from_fails_the_run_clearly(spark, lake):
    (lake.lake_root / "landing" / "sales").mkdir(parents=True)
    land(lake, ".hidden.json", json.dumps({"id": 1}))  # Spark skips hidden files: so does the sample
    spec = make_spec(pipeline())
    with pytest.raises(RunFailed, match=(
            r"source.schema: no files to infer the schema from in .*landing/sales; land a file there \(the first "
            r"run infers the schema from the files it finds\), or declare source.schema")):
        run(spark, spec, lake)
    assert not (lake.checkpoint_root / "sales" / "schemas").exists()


def test_a_stored_schema_is_read_back_and_changed_hints_become_its_next_version(lake):
    # no Spark: a stored version is never inferred again
    checkpoint = Checkpoint(str(lake.checkpoint_root / "sales"))
    v0 = SchemaVersion(version=0, ddl="zip STRING, amount STRING", created_at="x", reason="inferred")
    checkpoint.write_schema(v0.model_dump())
    spec, versions, inferred = source_schema(None, make_spec(pipeline("csv")), lake, checkpoint.uri, "r1")
    assert (spec.source.schema_, versions, inferred) == ("zip STRING, amount STRING", [v0], None)

    hinted = make_spec(pipeline("csv", schema_hints="amount DECIMAL(12,2)"))
    spec, versions, inferred = source_schema(None, hinted, lake, checkpoint.uri, "r2")
    assert (spec.source.schema_, [v.version for v in versions], versions[-1].reason, versions[-1].run_id) == (
        "zip STRING, amount DECIMAL(12,2)", [0, 1], "hints", "r2")
    assert checkpoint.schema_versions() == [0]  # stored by the run, before its query starts

    added = make_spec(pipeline("csv", schema_hints="country STRING"))
    with pytest.raises(InferenceError, match=r"source.schema_hints: column\(s\) country are not in the stored "
                                             r"schema \(version 0\) \(columns: zip STRING, amount STRING\)"):
        source_schema(None, added, lake, checkpoint.uri, "r3")


def test_parquet_types_come_from_the_files(spark, lake):
    spark.createDataFrame([(1, "ann", 2.5)], "id BIGINT, name STRING, score DOUBLE").coalesce(1).write.parquet(
        str(lake.lake_root / "landing" / "sales"))  # its _SUCCESS marker is skipped, as Spark skips it
    spec = make_spec(pipeline("parquet"))
    summary = run(spark, spec, lake)
    assert (summary["status"], summary["output_rows"], summary["schema_inferred"]["ddl"]) == (
        "succeeded", 1, "id BIGINT, name STRING, score DOUBLE")
    assert rows(spark, spec, lake) == [(1, "ann", 2.5)]


def test_a_reset_keeps_the_stored_versions_and_changed_hints_add_one(spark, lake):
    land(lake, "1.json", json.dumps({"id": 1, "amount": 1.5}))
    assert run(spark, make_spec(pipeline()), lake, run_id="r1")["schema_version"] == 0

    # the hints changed a type: a reset rebuilds the table with it; the new checkpoint holds both versions
    hinted = make_spec(pipeline(schema_hints="amount DECIMAL(12,2)"))
    summary = run(spark, hinted, lake, run_id="r2", reset=True)
    assert (summary["status"], summary["schema_version"], summary["schema_versions_added"]) == ("succeeded", 1, [1])
    assert "schema_inferred" not in summary and summary["replaced_checkpoint"]
    assert Checkpoint(hinted.checkpoint_path(lake)).schema_versions() == [0, 1]
    assert [(stored(lake, n)["ddl"], stored(lake, n)["reason"]) for n in (0, 1)] == [
        ("amount DOUBLE, id BIGINT", "inferred"), ("amount DECIMAL(12,2), id BIGINT", "hints")]
    assert types(spark, hinted, lake) == {"amount": "decimal(12,2)", "id": "bigint", "_rescued": "string"}
    assert rows(spark, hinted, lake) == [(Decimal("1.50"), 1, None)]
