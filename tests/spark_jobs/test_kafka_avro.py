"""Avro values from Kafka, produced by a real Avro writer (fastavro) to the real broker: Confluent's wire format
and plain bodies decoded with spark-avro; every record that is not one goes to the quarantine table with its
bytes in base64, never into the table as a row of nulls."""

from __future__ import annotations

import base64
import io
import json
import struct
from datetime import date, datetime, timezone
from pathlib import Path

import fastavro
import pytest

from sluice.contract import run_job
from sluice.contract.request import run_request
from sluice.spec import SpecError, load_spec
from spark_jobs.run.runner import run_pipeline
from tests.conftest import PROJECT
from tests.helpers import end_offsets, make_spec, new_topic

CLICK = {"type": "record", "name": "Click", "namespace": "dev.sluice.test", "fields": [
    {"name": "id", "type": "long"},
    {"name": "page", "type": "string"},
    {"name": "amount", "type": ["null", "double"], "default": None},
]}
# the same record with one field more at its end: a body written with it is longer than a Click
CLICK_V2 = {**CLICK, "fields": [*CLICK["fields"], {"name": "referrer", "type": "string", "default": ""}]}


def avro_body(record: dict, schema: dict = CLICK) -> bytes:
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(schema), record)
    return out.getvalue()


def confluent(schema_id: int, body: bytes, magic: int = 0) -> bytes:
    """Confluent's wire format: magic byte, schema id (4 bytes, big-endian), Avro body."""
    return struct.pack(">bI", magic, schema_id) + body


def click(i: int) -> dict:
    return {"id": i, "page": f"/p{i}", "amount": None if i % 2 else i * 1.5}


def send(bootstrap: str, topic: str, values: list[bytes | None], timestamp_ms: int | None = None) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap})
    for n, value in enumerate(values):
        if timestamp_ms is None:
            producer.produce(topic, key=str(n), value=value)
        else:
            producer.produce(topic, key=str(n), value=value, timestamp=timestamp_ms)
    assert producer.flush(30) == 0


def avro_spec(name: str, bootstrap: str, topic: str, schema_file: Path, **value) -> dict:
    return {
        "name": name,
        "source": {"format": "kafka", "bootstrap_servers": bootstrap, "topics": [topic], "timeout_seconds": 10,
                   "value": {"format": "avro", "schema_file": str(schema_file), **value}},
    }


def run(spark, spec, lake, **options) -> dict:
    return run_pipeline(spark, spec, lake, run_job(run_id="t", write_ledger=False, **options)).to_json()


def rows(spark, spec, lake) -> list[tuple]:
    df = spark.read.format("delta").load(spec.sink_path(lake))
    return sorted((r.id, r.page, r.amount, r.key, r.offset) for r in df.collect())


@pytest.fixture
def schema_file(tmp_path: Path) -> Path:
    path = tmp_path / "click.avsc"
    path.write_text(json.dumps(CLICK), encoding="utf-8")
    return path


def test_confluent_values_decode_and_every_bad_one_is_quarantined_with_its_bytes(spark, lake, kafka_broker,
                                                                                 schema_file):
    # Given good records under two accepted schema ids and five that are not, on one partition
    bootstrap = kafka_broker.bootstrap_servers
    topic = new_topic(bootstrap, partitions=1)
    good = [confluent(1, avro_body(click(0))), confluent(2, avro_body(click(1))), confluent(1, avro_body(click(2)))]
    wrong_magic = confluent(1, avro_body(click(3)), magic=1)
    unaccepted = confluent(7, avro_body(click(4)))
    truncated = confluent(1, avro_body(click(5))[:-4])
    longer = confluent(2, avro_body({**click(6), "referrer": "https://example.org"}, CLICK_V2))
    short = b"\x00\x00"
    send(bootstrap, topic, [*good, wrong_magic, unaccepted, truncated, longer, short, None])
    spec = make_spec(avro_spec("k_avro", bootstrap, topic, schema_file, schema_ids=[1, 2]))

    # When it runs
    first = run(spark, spec, lake)

    # Then the good records are the table's rows, with the record's columns and Kafka's
    assert (first["input_rows"], first["output_rows"], first["bad_records"], first["quarantined_rows"]) == (9, 3, 6, 6)
    assert first["micro_batches"][0]["sources"][0]["end_offset"] == {topic: {"0": 9}}
    assert rows(spark, spec, lake) == [(0, "/p0", 0.0, "0", 0), (1, "/p1", None, "1", 1), (2, "/p2", 3.0, "2", 2)]
    columns = spark.read.format("delta").load(spec.sink_path(lake)).columns
    assert columns == ["id", "page", "amount", "key", "topic", "partition", "offset", "timestamp"]
    # and every other record is in the quarantine table: its bytes in base64 and what is wrong with it
    quarantine = spark.read.format("delta").load(spec.quarantine_table_path(lake))
    bad = {r.source: (r.raw, r.error) for r in quarantine.collect()}
    b64 = lambda value: base64.b64encode(value).decode("ascii")  # noqa: E731
    assert bad == {
        f"{topic}/0/3": (b64(wrong_magic), "not Confluent wire format (magic byte 0x01, not 0x00)"),
        f"{topic}/0/4": (b64(unaccepted), "schema id 7 not in schema_ids [1, 2]"),
        f"{topic}/0/5": (b64(truncated), f"Avro body does not decode with schema {schema_file}"),
        f"{topic}/0/6": (b64(longer), f"Avro body does not decode with schema {schema_file}: 20 byte(s) left over "
                                      "after the record (written with another schema?)"),
        f"{topic}/0/7": (b64(short), "not Confluent wire format (2 bytes, shorter than its 5-byte header)"),
        f"{topic}/0/8": (None, "the record has no value (null)"),
    }

    # When more records arrive, the next run takes exactly those
    send(bootstrap, topic, [confluent(2, avro_body(click(10))), confluent(1, avro_body(click(11)))])
    second = run(spark, spec, lake)
    assert (second["input_rows"], second["output_rows"], second["quarantined_rows"]) == (2, 2, 0)
    source = second["micro_batches"][0]["sources"][0]
    assert (source["start_offset"], source["end_offset"]) == ({topic: {"0": 9}}, {topic: end_offsets(bootstrap, topic)})
    assert [r[0] for r in rows(spark, spec, lake)] == [0, 1, 2, 10, 11]
    assert quarantine.count() == 6


def test_plain_values_with_a_relative_schema_file_dry_run_and_backfill(spark, lake, kafka_broker, tmp_path,
                                                                      monkeypatch):
    # Given plain Avro bodies (no header) on two days, and a schema_file relative to the project folder
    monkeypatch.setenv("SLUICE_HOME", str(tmp_path))
    (tmp_path / "include" / "schemas").mkdir(parents=True)
    (tmp_path / "include" / "schemas" / "click.avsc").write_text(json.dumps(CLICK), encoding="utf-8")
    bootstrap = kafka_broker.bootstrap_servers
    topic = new_topic(bootstrap, partitions=1)
    day = lambda d: int(datetime(2026, 11, d, 12, tzinfo=timezone.utc).timestamp() * 1000)  # noqa: E731
    send(bootstrap, topic, [avro_body(click(i)) for i in range(3)], timestamp_ms=day(1))
    send(bootstrap, topic, [avro_body(click(3)), b"\x02"], timestamp_ms=day(2))
    data = avro_spec("k_avro_plain", bootstrap, topic, Path("include/schemas/click.avsc"), wire_format="plain")
    data["transform"] = {"sql": "SELECT id, page, amount, to_date(timestamp) AS day FROM source"}
    data["backfill"] = {"column": "day"}
    spec = make_spec(data)

    # A dry run decodes the same way and writes nothing
    dry = run(spark, spec, lake, dry_run=True)
    assert (dry["input_rows"], dry["output_rows"], dry["bad_records"]) == (5, 4, 1)
    assert not Path(spec.sink_path(lake)).exists()

    summary = run(spark, spec, lake)
    assert (summary["output_rows"], summary["quarantined_rows"]) == (4, 1)
    (bad,) = spark.read.format("delta").load(spec.quarantine_table_path(lake)).collect()
    assert (bad.raw, bad.error) == ("Ag==", "Avro body does not decode with schema include/schemas/click.avsc")

    # A backfill of the 1st rebuilds that day from the same committed records, through the same decoding
    fixed = make_spec({**data, "transform": {"sql": "SELECT id, upper(page) AS page, amount, to_date(timestamp) "
                                                    "AS day FROM source"}})
    slice_ = run_request(fixed, mode="backfill", backfill_from="2026-11-01", backfill_to="2026-11-01").backfill
    backfill = run(spark, fixed, lake, backfill=slice_)
    assert (backfill["input_rows"], backfill["output_rows"]) == (3, 3)
    got = sorted((r.id, r.page, r.day) for r in spark.read.format("delta").load(spec.sink_path(lake)).collect())
    assert got == [(0, "/P0", date(2026, 11, 1)), (1, "/P1", date(2026, 11, 1)), (2, "/P2", date(2026, 11, 1)),
                   (3, "/p3", date(2026, 11, 2))]


def kafka_value(value: dict) -> dict:
    return {"name": "k", "source": {"format": "kafka", "bootstrap_servers": "127.0.0.1:9", "topics": ["t"],
                                    "value": value}}


@pytest.mark.parametrize(("schema_text", "value", "message"), [
    (None, {"schema_ids": [1]}, r"source\.value\.schema_file: .*/missing\.avsc does not exist$"),
    ('{"type": "record",', {"schema_ids": [1]},
     r"source\.value\.schema_file: .*/click\.avsc is not valid JSON: Expecting"),
    ('"string"', {"schema_ids": [1]},
     r"source\.value\.schema_file: .*/click\.avsc is not a valid Avro record schema: the top-level type must be "
     r"a record"),
    ('{"type": "record", "name": "C", "fields": [{"name": "id", "type": "integer"}]}', {"schema_ids": [1]},
     r"click\.avsc is not a valid Avro record schema: field 'id': unknown type 'integer'"),
    ('{"type": "record", "name": "C", "fields": [{"name": "offset", "type": "long"}]}', {"schema_ids": [1]},
     r"click\.avsc is not a valid Avro record schema: field\(s\) offset clash with the columns sluice adds"),
    (json.dumps(CLICK), {"wire_format": "plain", "schema_ids": [1]},
     r"source\.value\.schema_ids: plain Avro values carry no schema id; remove schema_ids"),
    (json.dumps(CLICK), {}, r"source\.value\.schema_ids: required with wire_format: confluent \(the default\)"),
    (json.dumps(CLICK), {"schema_ids": []}, r"source\.value\.schema_ids: empty"),
    (json.dumps(CLICK), {"schema_ids": [1], "schema": "id BIGINT"},
     r"source\.value\.schema: avro values take their columns from the Avro schema"),
])
def test_avro_spec_errors_name_the_field_and_the_file(tmp_path, schema_text, value, message):
    path = tmp_path / ("missing.avsc" if schema_text is None else "click.avsc")
    if schema_text is not None:
        path.write_text(schema_text, encoding="utf-8")
    with pytest.raises(SpecError, match=message):
        make_spec(kafka_value({"format": "avro", "schema_file": str(path), **value}))


def test_avro_only_fields_are_refused_for_other_value_formats():
    with pytest.raises(SpecError, match=r"source\.value\.schema_file: only for avro values \(format: avro\), not "
                                        r"json; remove it"):
        make_spec(kafka_value({"format": "json", "schema": "id BIGINT", "schema_file": "x.avsc"}))
    with pytest.raises(SpecError, match=r"source\.value\.schema_file: required for avro values"):
        make_spec(kafka_value({"format": "avro", "schema_ids": "any"}))


def test_the_sample_spec_reads_the_project_schema_file(monkeypatch):
    # docs/kafka.md's walkthrough: the sample's relative schema_file starts at the project folder
    monkeypatch.delenv("SLUICE_HOME", raising=False)
    spec = load_spec(PROJECT / "include" / "samples" / "clicks_avro.yaml")
    value = spec.source.value
    assert (value.confluent, value.schema_ids, value.avro_schema_path()) == (
        True, [1], PROJECT / "include" / "schemas" / "clicks.avsc")
    assert [f["name"] for f in json.loads(value.avro_schema)["fields"]] == ["user", "page", "ts", "referrer"]


ALL_TYPES = {"type": "record", "name": "T", "fields": [
    {"name": "u", "type": ["int", "string"]},
    {"name": "e", "type": {"type": "enum", "name": "E", "symbols": ["A", "B"]}},
    {"name": "f", "type": {"type": "fixed", "name": "F", "size": 2}},
    {"name": "m", "type": {"type": "map", "values": "long"}},
    {"name": "a", "type": {"type": "array", "items": "string"}},
    {"name": "d", "type": {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2}},
    {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-micros"}},
    {"name": "dt", "type": {"type": "int", "logicalType": "date"}},
    {"name": "r", "type": {"type": "record", "name": "R", "fields": [{"name": "x", "type": "float"},
                                                                      {"name": "b", "type": "boolean"}]}},
    {"name": "n", "type": ["null", "R"], "default": None},
]}


def test_every_avro_type_decodes_and_is_as_long_encoded_again(spark, tmp_path):
    # Given plain bodies of a record with every kind of Avro type (the left-over check encodes each decoded
    # record again: it must be exactly as long as what the writer wrote, for every type)
    from decimal import Decimal

    from pyspark.sql import Row

    from sluice.spec import KafkaValue
    from spark_jobs.sources.kafka import avro_columns

    path = tmp_path / "all.avsc"
    path.write_text(json.dumps(ALL_TYPES), encoding="utf-8")
    ts = datetime(2026, 1, 1, tzinfo=timezone.utc)
    later = datetime(2026, 7, 4, 23, 59, 58, 123456, tzinfo=timezone.utc)  # microseconds, another UTC offset locally
    records = [
        {"u": 5, "e": "B", "f": b"ab", "m": {"k": 1}, "a": ["x", "y"], "d": Decimal("12.34"), "ts": ts,
         "dt": date(2026, 1, 2), "r": {"x": 1.5, "b": True}, "n": {"x": 2.0, "b": False}},
        {"u": "s", "e": "A", "f": b"cd", "m": {}, "a": [], "d": Decimal("-1.00"), "ts": later, "dt": date(2026, 1, 2),
         "r": {"x": 0.0, "b": False}, "n": None},
    ]
    raw = spark.createDataFrame(
        [(None, avro_body(r, ALL_TYPES), "t", 0, i, ts.replace(tzinfo=None)) for i, r in enumerate(records)],
        "key BINARY, value BINARY, topic STRING, partition INT, offset BIGINT, timestamp TIMESTAMP")
    value = KafkaValue.model_validate({"format": "avro", "schema_file": str(path), "wire_format": "plain"})

    # When they are decoded
    staged, columns, error = avro_columns(raw, value)
    got = staged.select(*columns, error.alias("error")).collect()

    # Then every field has its value and no record is bad
    assert [r.error for r in got] == [None, None]
    assert [(r.u, r.e, bytes(r.f), r.m, r.a, r.d, r.dt, r.r, r.n) for r in got] == [
        (Row(member0=5, member1=None), "B", b"ab", {"k": 1}, ["x", "y"], Decimal("12.34"), date(2026, 1, 2),
         Row(x=1.5, b=True), Row(x=2.0, b=False)),
        (Row(member0=None, member1="s"), "A", b"cd", {}, [], Decimal("-1.00"), date(2026, 1, 2),
         Row(x=0.0, b=False), None),
    ]
    # timestamp-micros: the instant to the microsecond (PySpark hands back a naive local time: compared as instants)
    assert [r.ts.timestamp() for r in got] == [ts.timestamp(), later.timestamp()]
    assert [r.ts.microsecond for r in got] == [0, 123456]


def test_spark_avro_alone_cannot_tell_a_bad_body_from_a_record_of_nulls(spark):
    # Why avro_columns adds a field to the reader schema and encodes records again (docs/kafka.md): what
    # spark-avro's from_avro does on its own with a truncated body and with bytes after the record
    from py4j.protocol import Py4JJavaError
    from pyspark.sql.avro.functions import from_avro

    good = avro_body(click(0))
    df = spark.createDataFrame([(good,), (good[:-4],), (good + b"xyz",)], "v BINARY")
    schema = json.dumps(CLICK)

    permissive = [r.c for r in df.select(from_avro("v", schema, {"mode": "PERMISSIVE"}).alias("c")).collect()]
    # PERMISSIVE: the truncated body is a struct of nulls, not a null; the longer one decodes as if it were good
    assert [None if c is None else c.asDict() for c in permissive] == [
        {"id": 0, "page": "/p0", "amount": 0.0},
        {"id": None, "page": None, "amount": None},
        {"id": 0, "page": "/p0", "amount": 0.0},
    ]
    # FAILFAST: the truncated body fails the whole query
    with pytest.raises(Py4JJavaError, match=r"Malformed records are detected in record parsing\. Current parse "
                                            r"Mode: FAILFAST"):
        df.select(from_avro("v", schema, {"mode": "FAILFAST"})).collect()
