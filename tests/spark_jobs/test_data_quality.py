"""Data quality on real Spark and Delta: bad records to quarantine, expectations, schema drift.

Every input record must end up in exactly one of: the sink, the quarantine table, or (its unknown fields)
the ``_rescued`` column -- asserted against what each test wrote.
"""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import unquote

import pytest

from sluice.contract import run_job
from sluice.storage.checkpoint import Checkpoint
from spark_jobs.batch import writer as batch_writer
from spark_jobs.quality.quarantine import quarantine_pending
from spark_jobs.run.runner import RunFailed, run_pipeline
from tests.helpers import (
    delta_version,
    make_spec,
    orders_spec,
    write_lines,
    write_orders,
)


def run(spark, spec, lake, **options) -> dict:
    return run_pipeline(spark, spec, lake, run_job(trigger=spec.trigger, run_id=options.pop("run_id", "t"),
                                                      write_ledger=False, **options)).to_json()


def table(spark, spec, lake):
    return spark.read.format("delta").load(spec.sink_path(lake))


def quarantine(spark, spec, lake):
    return spark.read.format("delta").load(spec.quarantine_table_path(lake))


def order(i: int, **extra) -> str:
    return json.dumps({"id": i, "ts": "2026-11-01T10:00:00Z", "customer": f"c{i}", "amount": 1.5 + i, **extra})


TRUNCATED = '{"id": 12, "ts": "2026-11-01T10:00:00Z", "cust'
WRONG_TYPE = '{"id": 13, "ts": "2026-11-01T10:00:00Z", "customer": "c13", "amount": "lots"}'
NOT_AN_OBJECT = "[1, 2]"


def write_mixed_orders(landing: Path) -> None:
    write_orders(landing, "good.json", range(10))
    write_lines(landing / "mixed.json", [order(10), order(11), TRUNCATED, WRONG_TYPE, order(14, coupon="HALF"),
                                         "", NOT_AN_OBJECT])
    write_lines(landing / "empty.json", [])
    (landing / "bom.json").write_text("\ufeff" + order(15) + "\n" + order(16) + "\n", encoding="utf-8")


def test_mixed_json_input_every_record_lands_exactly_once(spark, lake):
    spec = make_spec(orders_spec())
    landing = lake.lake_root / "landing" / "orders"
    write_mixed_orders(landing)

    summary = run(spark, spec, lake)

    good = [*range(12), 14, 15, 16]
    rows = {r.id: r for r in table(spark, spec, lake).collect()}
    assert sorted(rows) == good
    assert rows[14]._rescued == '{"coupon":"HALF"}' and rows[15]._rescued is None
    assert (rows[15].customer, rows[15].amount) == ("c15", 16.5)  # the BOM did not spoil the first record
    bad = {r.raw: (r.error, Path(r.source).name, r.batch_id, r.run_id, r.pipeline, r.expectation)
           for r in quarantine(spark, spec, lake).collect()}
    assert bad == {
        TRUNCATED: ("not a JSON object (malformed, truncated, or not {...})", "mixed.json", 0, "t", "orders", None),
        WRONG_TYPE: ("field(s) that do not fit the schema: amount DOUBLE", "mixed.json", 0, "t", "orders", None),
        NOT_AN_OBJECT: ("not a JSON object (malformed, truncated, or not {...})", "mixed.json", 0, "t", "orders", None),
    }
    assert (summary["input_rows"], summary["output_rows"]) == (19, 15)  # lines read; the blank one is no record
    assert (summary["bad_records"], summary["quarantined_rows"], summary["rescued_rows"]) == (3, 3, 1)
    assert summary["micro_batches"][0]["quarantined_rows"] == 3
    assert summary["quarantine"] == spec.quarantine_table_path(lake)

    again = run(spark, spec, lake)
    assert (again["batches"], again["quarantined_rows"]) == (0, 0)
    assert quarantine(spark, spec, lake).count() == 3


@pytest.mark.parametrize("known", [True, False], ids=["replay-known", "replay-unseen"])
def test_a_replayed_batch_writes_nothing_twice_in_either_table(spark, lake, monkeypatch, known):
    spec = make_spec(orders_spec())
    if not known:
        # the run cannot tell the batch is in the table (it does not see the checkpoint's pending batch): the
        # one-pass write finds Delta skipping it and counts the batch for what is missing
        monkeypatch.setattr(Checkpoint, "pending_batch", lambda _checkpoint: None)
    write_mixed_orders(lake.lake_root / "landing" / "orders")
    run(spark, spec, lake)
    sink_version = table(spark, spec, lake).count()
    # a crash after both Delta commits, before the checkpoint's commit: the batch is planned again
    checkpoint = Path(spec.checkpoint_path(lake))
    (checkpoint / "commits" / "0").unlink()
    (checkpoint / "commits" / ".0.crc").unlink(missing_ok=True)

    replay = run(spark, spec, lake, run_id="replay")

    assert replay["skipped_batches"] == [0]
    assert (replay["output_rows"], replay["quarantined_rows"]) == (0, 0)
    assert table(spark, spec, lake).count() == sink_version == 15
    assert quarantine(spark, spec, lake).count() == 3
    assert {r.run_id for r in quarantine(spark, spec, lake).collect()} == {"t"}


def crash_in_batch_0(spark, spec, lake, monkeypatch, name: str, fake) -> tuple[dict, Path]:
    """Run with ``batch_writer.<name>`` replaced by ``fake``, which raises as a driver dying there would stop
    the run: batch 0 is planned and not done in the checkpoint. The failed run's summary and the checkpoint."""
    monkeypatch.setattr(batch_writer, name, fake)
    with pytest.raises(RunFailed, match="^driver lost before the ") as failed:
        run(spark, spec, lake)
    monkeypatch.undo()
    checkpoint = Path(spec.checkpoint_path(lake))
    assert (checkpoint / "offsets" / "0").exists() and not (checkpoint / "commits" / "0").exists()
    return failed.value.summary.to_json(), checkpoint


def test_a_crash_between_the_quarantine_and_the_sink_commit_writes_each_quarantined_record_once(
        spark, lake, monkeypatch):
    # an expectation set to fail: the batch is counted before anything is written (BatchWriter._write_counted),
    # then it commits the quarantine rows, then the sink rows: two Delta transactions
    spec = make_spec(orders_spec(expectations=[{"name": "has_id", "rule": "id IS NOT NULL", "on_violation": "fail"}]))
    write_mixed_orders(lake.lake_root / "landing" / "orders")
    # A driver that dies between them leaves the quarantine commit, no sink commit and no commits/0 in the
    # checkpoint. The sink write failing once leaves exactly that state, without editing a Delta log by hand.
    def sink_write_fails(*_args, **_kwargs):
        raise RuntimeError("driver lost before the sink commit")

    failed, checkpoint = crash_in_batch_0(spark, spec, lake, monkeypatch, "write_sink", sink_write_fails)
    assert table(spark, spec, lake).count() == 0
    assert sorted(r.raw for r in quarantine(spark, spec, lake).collect()) == sorted([TRUNCATED, WRONG_TYPE,
                                                                                     NOT_AN_OBJECT])
    quarantine_version = delta_version(spec.quarantine_table_path(lake))

    rerun = run(spark, spec, lake, run_id="rerun")

    # the sink has no transaction for batch 0, so the batch is read again (not skipped); the quarantine table
    # has it, so Delta skips that write of the batch's rows:
    # https://docs.delta.io/latest/delta-streaming.html#idempotent-table-writes-in-foreachbatch
    assert rerun["skipped_batches"] == [] and [b["batch_id"] for b in rerun["micro_batches"]] == [0]
    assert sorted(r.id for r in table(spark, spec, lake).collect()) == [*range(12), 14, 15, 16]
    bad = sorted((r.raw, r.batch_id, r.run_id) for r in quarantine(spark, spec, lake).collect())
    assert bad == sorted([(TRUNCATED, 0, "t"), (WRONG_TYPE, 0, "t"), (NOT_AN_OBJECT, 0, "t")])
    assert delta_version(spec.quarantine_table_path(lake)) == quarantine_version
    # the ledger counts them once: the failed run reported no batch, the rerun reports the batch's 3
    assert (failed["batches"], failed["quarantined_rows"]) == (0, 0)
    assert (rerun["output_rows"], rerun["quarantined_rows"]) == (15, 3)


def test_a_crash_between_the_sink_commit_and_the_quarantine_rows_of_a_one_pass_batch_loses_none(
        spark, lake, monkeypatch):
    # the default spec: the batch is written in one pass (BatchWriter._write_one_pass), the sink commit first,
    # then the quarantine rows it counted on the way
    spec = make_spec(orders_spec())
    write_mixed_orders(lake.lake_root / "landing" / "orders")

    def quarantine_write_fails(rows, path, commit, **kwargs):
        if path == spec.quarantine_table_path(lake):
            raise RuntimeError("driver lost before the quarantine commit")
        return write_rows(rows, path, commit, **kwargs)

    write_rows = batch_writer.write_rows
    failed, checkpoint = crash_in_batch_0(spark, spec, lake, monkeypatch, "write_rows", quarantine_write_fails)
    assert sorted(r.id for r in table(spark, spec, lake).collect()) == [*range(12), 14, 15, 16]
    assert not Path(spec.quarantine_table_path(lake)).exists()
    assert quarantine_pending(spark, str(checkpoint)) == 0  # the marker names the batch
    sink_version = delta_version(spec.sink_path(lake))

    rerun = run(spark, spec, lake, run_id="rerun")

    # the batch is read again for its quarantine rows (not skipped as done); Delta skips its sink write
    assert rerun["skipped_batches"] == [0] and rerun["micro_batches"][0]["replay_of_version"] == sink_version
    assert delta_version(spec.sink_path(lake)) == sink_version
    assert sorted(r.id for r in table(spark, spec, lake).collect()) == [*range(12), 14, 15, 16]
    bad = sorted((r.raw, r.batch_id, r.run_id) for r in quarantine(spark, spec, lake).collect())
    assert bad == sorted([(TRUNCATED, 0, "rerun"), (WRONG_TYPE, 0, "rerun"), (NOT_AN_OBJECT, 0, "rerun")])
    assert quarantine_pending(spark, str(checkpoint)) is None and (checkpoint / "commits" / "0").is_file()
    # counted once: the failed run reported no batch; the rerun wrote no sink row and the 3 quarantine rows
    assert (failed["batches"], failed["quarantined_rows"]) == (0, 0)
    assert (rerun["output_rows"], rerun["quarantined_rows"]) == (0, 3)

    again = run(spark, spec, lake, run_id="again")
    assert (again["batches"], quarantine(spark, spec, lake).count(), table(spark, spec, lake).count()) == (0, 3, 15)


@pytest.mark.parametrize("where", ["relative", "absolute"])
def test_quarantine_path_puts_the_quarantine_table_there(spark, lake, tmp_path, where):
    elsewhere = tmp_path / "elsewhere" / "rejected"
    quarantine_path = "quality/orders_rejected" if where == "relative" else str(elsewhere)
    spec = make_spec(orders_spec(quarantine_path=quarantine_path))
    write_lines(lake.lake_root / "landing" / "orders" / "a.json", [order(1), TRUNCATED, order(2)])

    summary = run(spark, spec, lake)

    expected = lake.lake_root.resolve() / "quality" / "orders_rejected" if where == "relative" else elsewhere
    assert summary["quarantine"] == str(expected)
    rows = spark.read.format("delta").load(str(expected)).collect()
    assert [(r.raw, r.error) for r in rows] == [
        (TRUNCATED, "not a JSON object (malformed, truncated, or not {...})")]
    assert not (lake.lake_root / "_quarantine").exists()
    assert sorted(r.id for r in table(spark, spec, lake).collect()) == [1, 2]


def test_csv_rows_that_do_not_fit_are_quarantined_and_quoted_newlines_are_one_record(spark, lake):
    spec = make_spec({
        "name": "customers",
        "source": {"format": "csv", "path": "landing/customers", "options": {"header": True},
                   "schema": "customer STRING, name STRING, country STRING, signed_up DATE"},
        "transform": {"sql": "SELECT *, _metadata.file_name AS source_file FROM source"},
    })
    landing = lake.lake_root / "landing" / "customers"
    landing.mkdir(parents=True)
    (landing / "a.csv").write_text(
        "\ufeffcustomer,name,country,signed_up\n"
        'c1,Ada,UK,2026-11-01\n'
        'c2,"Grace\nHopper",US,2026-11-02\n'
        "c3,Linus,FI,yesterday\n"
        "c4,Guido\n"
        "c5,Barbara,US,2026-11-03,extra\n",
        encoding="utf-8",
    )

    summary = run(spark, spec, lake)

    rows = {r.customer: (r.name, str(r.signed_up), r.source_file) for r in table(spark, spec, lake).collect()}
    assert rows == {"c1": ("Ada", "2026-11-01", "a.csv"), "c2": ("Grace\nHopper", "2026-11-02", "a.csv")}
    assert "_metadata" not in table(spark, spec, lake).columns
    bad = {r.raw: Path(r.source).name for r in quarantine(spark, spec, lake).collect()}
    assert bad == {"c3,Linus,FI,yesterday": "a.csv", "c4,Guido": "a.csv", "c5,Barbara,US,2026-11-03,extra": "a.csv"}
    assert (summary["input_rows"], summary["output_rows"], summary["quarantined_rows"]) == (5, 2, 3)


@pytest.mark.parametrize("kind", ["json", "csv", "json_spark_discovery"])
def test_a_bad_records_source_is_its_files_path_as_the_metadata_column_gives_it(spark, lake, kind):
    # computed for the bad rows only (jvm/files FilePathExpression), not copied into every row by the scan: the
    # same text as _metadata.file_path (file:/..., escaped), the right file for each record over several files
    # read by one task, in a folder and files whose names need escaping
    from pyspark.sql import functions as F

    fmt = "csv" if kind == "csv" else "json"
    source = {**orders_spec()["source"], "format": fmt, "path": "landing/odd folder%20x"}
    if fmt == "csv":
        source["schema"] = "customer STRING, amount DOUBLE"
    if kind == "json_spark_discovery":
        source["discovery"] = "spark"
    spec = make_spec(orders_spec(source=source))
    landing = lake.lake_root / "landing" / "odd folder%20x"
    names = [f"a b.{fmt}", f"c+d%25.{fmt}", f"é.{fmt}"]
    bad = [f"c{n},lots" if fmt == "csv" else '{"id": "x%d"}' % n for n in range(3)]
    for n, name in enumerate(names):
        good = f"c{n},1.5" if fmt == "csv" else order(n)
        write_lines(landing / name, [good, bad[n], good])

    run(spark, spec, lake)

    paths = [r.p for r in spark.read.format("text").load(str(landing))
             .select(F.col("_metadata.file_path").alias("p")).distinct().collect()]
    by_name = {Path(unquote(p)).name: p for p in paths}
    assert sorted(by_name) == sorted(names) and all(p.startswith("file:/") and "%20" in p for p in paths)
    got = {r.raw: r.source for r in quarantine(spark, spec, lake).collect()}
    assert got == {bad[n]: by_name[name] for n, name in enumerate(names)}


def test_on_bad_records_drop_counts_them_and_fail_stops_before_the_commit(spark, lake):
    landing = lake.lake_root / "landing" / "orders"
    write_lines(landing / "a.json", [order(1), TRUNCATED, order(2)])
    dropping = make_spec(orders_spec(on_bad_records="drop"))
    summary = run(spark, dropping, lake)
    assert (summary["bad_records"], summary["dropped_rows"], summary["quarantined_rows"]) == (1, 1, 0)
    assert sorted(r.id for r in table(spark, dropping, lake).collect()) == [1, 2]

    failing = make_spec(orders_spec(name="orders_strict", on_bad_records="fail", sink={"path": "bronze/strict"}))
    with pytest.raises(RunFailed) as failed:
        run(spark, failing, lake)
    assert failed.value.summary.error == (
        f"1 bad record(s) in batch 0 and on_bad_records: fail, e.g. {TRUNCATED!r} from file:{landing}/a.json: "
        "not a JSON object (malformed, truncated, or not {...}). Nothing of the batch was written and the "
        "checkpoint did not advance. Fix or remove the records and run again, or set on_bad_records: quarantine "
        "(keep them aside in the quarantine table) or drop."
    )
    assert table(spark, failing, lake).count() == 0
    assert not (Path(failing.checkpoint_path(lake)) / "commits" / "0").exists()


EXPECTATIONS = [
    {"name": "has_customer", "rule": "customer IS NOT NULL", "on_violation": "warn"},
    {"name": "not_a_test", "rule": "customer <> 'test'", "on_violation": "drop"},
    {"name": "positive_amount", "rule": "amount > 0", "on_violation": "quarantine"},
    {"name": "usual_amount", "rule": "amount < 100", "on_violation": "warn"},
]


def test_expectations_warn_drop_and_quarantine(spark, lake):
    spec = make_spec(orders_spec(expectations=EXPECTATIONS,
                                 transform={"sql": "SELECT id, customer, amount * 2 AS amount FROM source"}))
    rows = [order(1), order(2, customer=None), order(3, customer="test"), order(4, amount=-1.0),
            order(5, customer="test", amount=0.0), order(6, customer=None, amount=None), order(7, amount=60.0)]
    write_lines(lake.lake_root / "landing" / "orders" / "a.json", rows)

    summary = run(spark, spec, lake)

    # 7 violates only usual_amount (warn): counted, and kept as it is
    assert {r.id: (r.customer, r.amount) for r in table(spark, spec, lake).collect()} == {
        1: ("c1", 5.0), 7: ("c7", 120.0)}
    assert summary["expectations"] == {
        "has_customer": {"rule": "customer IS NOT NULL", "on_violation": "warn", "violations": 2},
        "not_a_test": {"rule": "customer <> 'test'", "on_violation": "drop", "violations": 4},  # NULL violates
        "positive_amount": {"rule": "amount > 0", "on_violation": "quarantine", "violations": 3},
        "usual_amount": {"rule": "amount < 100", "on_violation": "warn", "violations": 2},  # 6 (NULL) and 7
    }
    # 2 and 3 dropped (a NULL customer violates not_a_test too); 5 and 6 violate both: quarantine wins
    assert (summary["dropped_rows"], summary["quarantined_rows"], summary["output_rows"]) == (2, 3, 2)
    bad = {json.loads(r.raw)["id"]: (r.expectation, r.error, r.source) for r in quarantine(spark, spec, lake).collect()}
    assert bad == {
        4: ("positive_amount", "expectation(s) violated: positive_amount", None),
        5: ("positive_amount", "expectation(s) violated: positive_amount", None),
        6: ("positive_amount", "expectation(s) violated: positive_amount", None),
    }
    assert json.loads(quarantine(spark, spec, lake).where("raw LIKE '%\"id\":4%'").first().raw) == {
        "id": 4, "customer": "c4", "amount": -2.0}


def test_a_failing_expectation_leaves_the_checkpoint_and_the_fixed_rule_reprocesses_the_batch(spark, lake):
    rule = {"name": "small_amount", "rule": "amount < 5", "on_violation": "fail"}
    spec = make_spec(orders_spec(expectations=[rule]))
    write_lines(lake.lake_root / "landing" / "orders" / "a.json", [order(1), order(7)])

    with pytest.raises(RunFailed) as failed:
        run(spark, spec, lake)
    error = failed.value.summary.error
    assert error.startswith("expectation small_amount (amount < 5) failed for 1 row(s) of batch 0, e.g. {\"id\":7,")
    assert "Nothing of the batch was written and the checkpoint did not advance" in error
    checkpoint = Path(spec.checkpoint_path(lake))
    assert (checkpoint / "offsets" / "0").exists() and not (checkpoint / "commits" / "0").exists()
    assert table(spark, spec, lake).count() == 0

    fixed = make_spec(orders_spec(expectations=[{**rule, "rule": "amount < 50"}]))
    summary = run(spark, fixed, lake)
    assert [b["batch_id"] for b in summary["micro_batches"]] == [0]  # the same batch, processed again
    assert sorted(r.id for r in table(spark, fixed, lake).collect()) == [1, 7]


def test_an_expectation_that_is_not_sql_over_the_output_is_a_clear_error(spark, lake):
    spec = make_spec(orders_spec(expectations=[{"name": "typo", "rule": "amout > 0"}]))
    (lake.lake_root / "landing" / "orders").mkdir(parents=True)
    with pytest.raises(RunFailed, match=r"^expectations\.typo\.rule: 'amout > 0' is not a Spark SQL boolean over the "
                                        r"transformed row \(columns: id, ts, customer, amount, _rescued\)"):
        run(spark, spec, lake)


def test_schema_evolution_add_columns_adds_new_fields_and_quarantines_misfits(spark, lake):
    spec = make_spec(orders_spec(schema_evolution="add_columns"))
    landing = lake.lake_root / "landing" / "orders"
    write_lines(landing / "a.json", [order(1), order(2, coupon="HALF", qty=3)])
    first = run(spark, spec, lake)
    assert first["added_columns"] == ["coupon", "qty"]
    rows = {r.id: (r.coupon, r.qty) for r in table(spark, spec, lake).collect()}
    assert rows == {1: (None, None), 2: ("HALF", 3)}
    assert "_rescued" not in table(spark, spec, lake).columns

    bad_qty = order(4, qty="many")
    write_lines(landing / "b.json", [order(3, qty=5), bad_qty])
    second = run(spark, spec, lake)
    assert (second["quarantined_rows"], second.get("added_columns")) == (1, None)
    assert {r.id: r.qty for r in table(spark, spec, lake).collect()} == {1: None, 2: 3, 3: 5}
    misfit = quarantine(spark, spec, lake).first()
    assert json.loads(misfit.raw)["id"] == 4 and misfit.error.endswith("qty bigint")


def test_schema_evolution_fail_stops_on_new_fields(spark, lake):
    spec = make_spec(orders_spec(schema_evolution="fail"))
    write_lines(lake.lake_root / "landing" / "orders" / "a.json", [order(1), order(2, coupon="HALF")])
    with pytest.raises(RunFailed, match=r"^1 record\(s\) in batch 0 have fields the schema does not declare \(e\.g\. "
                                        r"coupon: \{\"coupon\":\"HALF\"\}\) and schema_evolution: fail"):
        run(spark, spec, lake)
    assert table(spark, spec, lake).count() == 0


def test_a_parquet_file_with_another_schema_is_a_clear_error(spark, lake):
    landing = lake.lake_root / "landing" / "events"
    spark.createDataFrame([(1, "a")], "id BIGINT, word STRING").coalesce(1).write.parquet(str(landing / "good"))
    spark.createDataFrame([("x", 2.0)], "id STRING, score DOUBLE").coalesce(1).write.parquet(str(landing / "bad"))
    spec = make_spec({"name": "events", "source": {"format": "parquet", "path": "landing/events",
                                                   "schema": "id BIGINT, word STRING",
                                                   "options": {"recursiveFileLookup": True}}})
    with pytest.raises(RunFailed) as failed:
        run(spark, spec, lake)
    error = failed.value.summary.error
    bad_file = next((landing / "bad").glob("*.parquet"))
    assert error.startswith(f"parquet file file://{bad_file} does not have the schema of source.schema (id BIGINT, "
                            "word STRING): missing column(s) word; column(s) not in the schema: score double; "
                            "column id is string in the file, bigint in the schema.")
    assert table(spark, spec, lake).count() == 0


def test_bad_records_of_a_stateful_pipeline_are_quarantined_by_its_companion_query(spark, lake):
    spec = make_spec({
        "name": "windowed",
        "source": {"format": "json", "path": "landing/events", "schema": "ts TIMESTAMP, word STRING"},
        "transform": {"watermark": {"column": "ts", "delay": "10 minutes"},
                      "sql": "SELECT window.start AS window_start, word, count(*) AS count FROM source "
                             "GROUP BY window(ts, '10 minutes'), word"},
    })
    lines = [json.dumps({"ts": "2026-11-01T10:01:00Z", "word": "a"}), '{"ts": "never", "word": "a"}',
             json.dumps({"ts": "2026-11-01T10:02:00Z", "word": "a"}), json.dumps({"ts": "2026-11-01T11:00:00Z", "word": "b"})]
    write_lines(lake.lake_root / "landing" / "events" / "a.json", lines)

    summary = run(spark, spec, lake)

    assert [(r.word, r["count"]) for r in table(spark, spec, lake).collect()] == [("a", 2)]
    assert [r.raw for r in quarantine(spark, spec, lake).collect()] == ['{"ts": "never", "word": "a"}']
    assert summary["quarantined_rows"] == 1
    again = run(spark, spec, lake)
    assert again["quarantined_rows"] == 0 and quarantine(spark, spec, lake).count() == 1


def test_multiline_json_quarantines_a_bad_file_whole_and_has_no_rescued_column(spark, lake):
    spec = make_spec({"name": "ml", "source": {"format": "json", "path": "landing/ml", "schema": "id BIGINT, v STRING",
                                               "options": {"multiLine": True}}})
    landing = lake.lake_root / "landing" / "ml"
    landing.mkdir(parents=True)
    (landing / "good.json").write_text('[\n  {"id": 1, "v": "a", "extra": true},\n  {"id": 2, "v": "b"}\n]\n')
    bad_text = '{"id": 3,\n  "v": "c",\n  "broken'
    (landing / "bad.json").write_text(bad_text)

    summary = run(spark, spec, lake)
    assert (summary["output_rows"], summary["quarantined_rows"], summary["rescued_rows"]) == (2, 1, 0)
    assert table(spark, spec, lake).columns == ["id", "v"]  # no _rescued: the extra field is not kept
    assert sorted(tuple(r) for r in table(spark, spec, lake).collect()) == [(1, "a"), (2, "b")]
    (bad,) = quarantine(spark, spec, lake).collect()
    assert bad.raw == bad_text and bad.source.endswith("/bad.json")  # the whole file, once
