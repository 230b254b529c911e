"""A Kafka json value without ``source.value.schema`` on a real broker, Spark and Delta (sluice issue 23,
part 1): the first run infers the schema from a bounded sample of the topic and stores it as ``schemas/0``;
hints fix types; later runs read with the stored version (a field it does not declare goes to ``_rescued``);
``add_columns`` stores the next version and the ledger records the version each run used; a dry run shows
the schema and stores nothing; an empty topic fails the run clearly."""

from __future__ import annotations

import json
from datetime import datetime
from decimal import Decimal

import pytest

from sluice.contract import run_job
from sluice.operations.ledger import latest_runs
from sluice.storage.checkpoint import Checkpoint
from spark_jobs.run.runner import RunFailed, run_pipeline
from spark_jobs.sources.inference import InferenceError, infer, source_schema
from spark_jobs.sources.kafka import client_config, newest_offsets
from tests.helpers import make_spec, new_topic


def run(spark, spec, lake, **options) -> dict:
    return run_pipeline(spark, spec, lake, run_job(trigger="available_now", run_id=options.pop("run_id", "t"),
                                                      write_ledger=options.pop("write_ledger", False),
                                                      **options)).to_json()


def pipeline(bootstrap: str, topic: str, value: dict | None = None, **extra) -> dict:
    return {"name": "sales", "source": {"format": "kafka", "bootstrap_servers": bootstrap, "topics": [topic],
                                        "timeout_seconds": 10, "value": {"format": "json", **(value or {})},
                                        **extra.pop("source", {})},
            "sink": {"path": "bronze/sales"}, **extra}


def send(bootstrap: str, topic: str, *values: object) -> None:
    """Each value as one record (dicts as JSON, strings as they are), in order, on the topic's partition 0."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap})
    for value in values:
        producer.produce(topic, partition=0, value=value if isinstance(value, str) else json.dumps(value))
    assert producer.flush(30) == 0


def stored(lake, version: int) -> dict:
    return json.loads((lake.checkpoint_root / "sales" / "schemas" / str(version)).read_text())


def rows(spark, spec, lake, columns: str) -> list[tuple]:
    table = spark.read.format("delta").load(spec.sink_path(lake))
    return sorted(tuple(r) for r in table.selectExpr(*columns.split(", ")).collect())


def test_first_run_infers_with_hints_and_later_runs_read_with_the_stored_schema(spark, lake, kafka_broker):
    bootstrap = kafka_broker.bootstrap_servers
    topic = new_topic(bootstrap, partitions=1)
    send(bootstrap, topic, {"id": 1, "amount": 12.5, "name": "ann"},
         {"id": 2, "amount": 7, "name": "bob", "ts": "2026-11-01 10:00:00"}, "{truncated")
    spec = make_spec(pipeline(bootstrap, topic, {"schema_hints": "amount DECIMAL(12,2), ts TIMESTAMP"}))
    summary = run(spark, spec, lake, run_id="run-1")

    # the malformed value is left out of the inference, and quarantined by the run
    ddl = "amount DECIMAL(12,2), id BIGINT, name STRING, ts TIMESTAMP"
    assert (summary["status"], summary["output_rows"], summary["quarantined_rows"]) == ("succeeded", 2, 1)
    assert (summary["schema_version"], summary["schema_inferred"]) == (0, {
        "version": 0, "ddl": ddl, "records": 3, "topics": [topic], "hints": "amount DECIMAL(12,2), ts TIMESTAMP",
        "stored": True})
    record = stored(lake, 0)
    assert {k: record[k] for k in ("version", "ddl", "run_id", "reason", "records", "topics", "files", "hints")} == {
        "version": 0, "ddl": ddl, "run_id": "run-1", "reason": "inferred", "records": 3, "topics": [topic],
        "files": [], "hints": "amount DECIMAL(12,2), ts TIMESTAMP"}
    table = spark.read.format("delta").load(spec.sink_path(lake))
    assert {f.name: f.dataType.simpleString() for f in table.schema.fields} == {
        "amount": "decimal(12,2)", "id": "bigint", "name": "string", "ts": "timestamp", "key": "string",
        "topic": "string", "partition": "int", "offset": "bigint", "timestamp": "timestamp", "_rescued": "string"}

    # alone, this record would infer amount and name as BIGINT, and it has a field the schema does not declare
    send(bootstrap, topic, {"id": 3, "amount": 4, "name": 5, "coupon": "C"})
    summary = run(spark, spec, lake, run_id="run-2")
    assert (summary["status"], summary["output_rows"], summary["schema_version"]) == ("succeeded", 1, 0)
    assert "schema_inferred" not in summary and "schema_versions_added" not in summary
    assert Checkpoint(spec.checkpoint_path(lake)).schema_versions() == [0]
    assert rows(spark, spec, lake, "id, amount, name, ts, offset, _rescued") == [
        (1, Decimal("12.50"), "ann", None, 0, None),
        (2, Decimal("7.00"), "bob", datetime(2026, 11, 1, 10, 0), 1, None),
        (3, Decimal("4.00"), "5", None, 3, '{"coupon":"C"}')]


def test_add_columns_stores_the_next_version_and_the_ledger_records_the_version_used(spark, lake, kafka_broker):
    bootstrap = kafka_broker.bootstrap_servers
    topic = new_topic(bootstrap, partitions=1)
    spec = make_spec(pipeline(bootstrap, topic, schema_evolution="add_columns"))
    send(bootstrap, topic, {"id": 1})
    assert run(spark, spec, lake, run_id="r1", write_ledger=True)["schema_version"] == 0

    send(bootstrap, topic, {"id": 2, "coupon": "A"})
    summary = run(spark, spec, lake, run_id="r2", write_ledger=True)
    assert (summary["status"], summary["schema_version"], summary["schema_versions_added"],
            summary["added_columns"]) == ("succeeded", 0, [1], ["coupon"])
    record = stored(lake, 1)
    assert {k: record[k] for k in ("version", "ddl", "run_id", "reason", "added_columns", "batch_id")} == {
        "version": 1, "ddl": "id BIGINT, coupon STRING", "run_id": "r2", "reason": "add_columns",
        "added_columns": ["coupon"], "batch_id": 1}
    assert rows(spark, spec, lake, "id, coupon") == [(1, None), (2, "A")]
    ledger = latest_runs(str(lake.ledger_path), "sales")
    assert [(r["run_id"], r["schema_version"]) for r in ledger] == [("r2", 0), ("r1", 0)]
    # the next run reads the value with version 1: coupon is a declared column (no Spark needed to know it)
    read, versions, inferred = source_schema(None, spec, lake, spec.checkpoint_path(lake), "r3")
    assert (read.source.value.schema_, [v.version for v in versions], inferred) == (
        "id BIGINT, coupon STRING", [0, 1], None)
    # changed value.schema_hints: the next version, stored by the run before its query starts
    hinted = make_spec(pipeline(bootstrap, topic, {"schema_hints": "coupon VARCHAR(8)"},
                                schema_evolution="add_columns"))
    read, versions, _ = source_schema(None, hinted, lake, spec.checkpoint_path(lake), "r3")
    assert (read.source.value.schema_, versions[-1].version, versions[-1].reason) == (
        "id BIGINT, coupon VARCHAR(8)", 2, "hints")


def test_an_empty_topic_fails_clearly_and_a_dry_run_shows_the_schema_and_stores_nothing(spark, lake, kafka_broker):
    bootstrap = kafka_broker.bootstrap_servers
    topic = new_topic(bootstrap, partitions=1)
    spec = make_spec(pipeline(bootstrap, topic))
    with pytest.raises(RunFailed, match=(
            rf"source.value.schema: no records to infer the schema from in topic\(s\) {topic} \(from "
            r"starting_offsets earliest\); produce a record \(the first run infers the schema from the records it "
            r"finds\), or declare source.value.schema")):
        run(spark, spec, lake)
    assert not (lake.checkpoint_root / "sales" / "schemas").exists()

    send(bootstrap, topic, {"id": 1, "old": 1}, {"id": 2, "new": "x"})
    summary = run(spark, spec, lake, dry_run=True)
    assert (summary["status"], summary["dry_run"], summary["input_rows"], summary["schema_version"]) == (
        "succeeded", True, 2, 0)
    assert summary["schema_inferred"] == {"version": 0, "ddl": "id BIGINT, new STRING, old BIGINT", "records": 2,
                                          "topics": [topic], "hints": None, "stored": False}
    assert not (lake.checkpoint_root / "sales").exists()
    assert not (lake.lake_root / "bronze" / "sales").exists()

    # the sample is bounded: the first records from starting_offsets, or with latest (where the first run
    # starts after the records there now) the newest ones
    first = infer(spark, make_spec(pipeline(bootstrap, topic, {"inference": {"max_records": 1}})), lake, "t")
    assert (first.ddl, first.records) == ("id BIGINT, old BIGINT", 1)
    newest = make_spec(pipeline(bootstrap, topic, {"inference": {"max_records": 1}},
                                source={"starting_offsets": "latest"}))
    assert infer(spark, newest, lake, "t").ddl == "id BIGINT, new STRING"
    # ... read from the last max_records offsets of each partition, not the whole topic
    config = client_config(newest.source)
    assert newest_offsets(spark, newest.source, config, 1) == {topic: {"0": 1}}
    assert newest_offsets(spark, newest.source, config, 5) == {topic: {"0": 0}}  # not before the earliest
    unmatched = make_spec(pipeline(bootstrap, topic, source={"topics": None, "subscribe_pattern": "no_such_.*",
                                                             "starting_offsets": "latest"}))
    with pytest.raises(InferenceError, match=r"source.value.schema: no records to infer the schema from in topics "
                                             r"matching no_such_\.\* \(from starting_offsets latest\)"):
        infer(spark, unmatched, lake, "t")
