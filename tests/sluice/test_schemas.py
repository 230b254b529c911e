"""A file source without ``source.schema``, a Kafka json value without ``value.schema`` (sluice issue 23, part 1): the spec's fields and their errors, the
stored versions' format in the checkpoint, hints over inferred columns, and ``sluice schema NAME`` -- no Spark."""

from __future__ import annotations

import json

import pytest

from sluice.schema.change import next_change
from sluice.schema.stored import (
    SchemaVersion,
    hinted_version,
    history,
    infers_schema,
    next_version,
    schema_hints,
    stored_spec,
    with_hints,
    with_schema,
)
from sluice.spec import SpecError, parse_spec
from sluice.storage.checkpoint import Checkpoint
from sluice_cli.main import main
from tests.helpers import write_spec


def spec_data(**source) -> dict:
    return {"name": "sales", "source": {"format": "csv", "path": "landing/sales", **source}}


def test_json_csv_and_parquet_sources_need_no_schema():
    for fmt in ("json", "csv", "parquet"):
        source = parse_spec(spec_data(format=fmt)).source
        assert (source.schema_, source.infers_schema()) == (None, True)
    assert parse_spec(spec_data(schema="a INT")).source.infers_schema() is False
    spec = parse_spec(spec_data(schema_hints="amount DECIMAL(12,2)", inference={"max_files": 3, "max_bytes": 1000}))
    assert (spec.source.inference.max_files, spec.source.inference.max_bytes) == (3, 1000)


@pytest.mark.parametrize(("source", "message"), [
    ({"schema_hints": "amount DECIMAL(12,2), ts TIMSTAMP"},
     "source.schema_hints: not a Spark DDL schema: unknown type 'TIMSTAMP'"),
    ({"schema_hints": "a INT, A BIGINT"}, r"source.schema_hints: column\(s\) a hinted twice; name each column once"),
    ({"schema_hints": "_rescued STRING"}, "source.schema_hints: column _rescued is the column sluice adds"),
    ({"schema": "a INT", "schema_hints": "a BIGINT"},
     "source.schema_hints: apply to an inferred schema; with a declared schema, write the types in schema itself"),
    ({"schema": "a INT", "inference": {"max_files": 5}},
     "source.inference: the schema is declared, nothing is inferred; remove inference"),
    ({"format": "text", "schema_hints": "a INT"}, "source.schema_hints: text sources are one column `value STRING`, nothing is inferred; remove schema_hints"),
    ({"format": "parquet", "schema_hints": "a DECIMAL(4,1)"},
     "source.schema_hints: parquet files carry their columns' types, and the file source reads them as they are"),
    ({"inference": {"max_files": 0}}, "source.inference.max_files: Input should be greater than 0"),
])
def test_bad_schema_fields_name_the_field_and_the_fix(source, message):
    with pytest.raises(SpecError, match=message):
        parse_spec(spec_data(**source), "sales.yaml")


def test_hints_set_the_type_of_named_columns_and_add_the_missing_ones_at_the_end():
    inferred = [("zip", "STRING"), ("Amount", "STRING"), ("city", "STRING")]
    assert with_hints(inferred, "amount DECIMAL(12,2), ts TIMESTAMP") == [
        ("zip", "STRING"), ("Amount", "DECIMAL(12,2)"), ("city", "STRING"), ("ts", "TIMESTAMP")]
    assert with_hints(inferred, None) == inferred


def test_next_version_adds_only_new_columns_and_says_who_made_it():
    v0 = SchemaVersion(version=0, ddl="id BIGINT", created_at="2026-11-26T10:00:00+00:00", run_id="r0",
                       reason="inferred", files=["/l/1.json"])
    v1 = next_version(v0, [("coupon", "STRING"), ("ID", "BIGINT"), ("qty", "INT")], run_id="r1", batch_id=4)
    assert (v1.version, v1.ddl, v1.reason, v1.run_id, v1.batch_id, v1.added_columns) == (
        1, "id BIGINT, coupon STRING, qty INT", "add_columns", "r1", 4, ["coupon", "qty"])
    assert next_version(v1, [("coupon", "STRING")], run_id="r2", batch_id=5) is None


def test_changed_hints_make_the_next_version_and_unchanged_or_removed_ones_none():
    v0 = SchemaVersion(version=0, ddl="amount STRING, id BIGINT", created_at="x", reason="inferred",
                       hints="id BIGINT")
    v1 = hinted_version(v0, "id BIGINT, amount DECIMAL(12,2), ts TIMESTAMP", run_id="r1")
    assert (v1.version, v1.ddl, v1.reason, v1.hints, v1.run_id, v1.added_columns) == (
        1, "amount DECIMAL(12,2), id BIGINT, ts TIMESTAMP", "hints", "id BIGINT, amount DECIMAL(12,2), ts TIMESTAMP",
        "r1", ["ts"])
    assert hinted_version(v0, "id BIGINT", run_id="r1") is None  # the hints the version was made with
    assert hinted_version(v0, None, run_id="r1") is None  # removed: the types they gave stay
    assert hinted_version(v0, "ID bigint", run_id="r1") is None  # different text, no different type


def _store(lake, *versions: SchemaVersion) -> str:
    spec = parse_spec(spec_data(format="json"))
    checkpoint = Checkpoint(spec.checkpoint_path(lake))
    for version in versions:
        checkpoint.write_schema(version.model_dump())
    return checkpoint.uri


V0 = SchemaVersion(version=0, ddl="id BIGINT, zip STRING", created_at="2026-11-26T10:00:00+00:00", run_id="run-a",
                   reason="inferred", files=["/lake/landing/sales/1.json"], hints="zip STRING")
V1 = SchemaVersion(version=1, ddl="id BIGINT, zip STRING, coupon STRING", created_at="2026-11-26T11:00:00+00:00",
                   run_id="run-b", reason="add_columns", added_columns=["coupon"], batch_id=3)


def test_versions_are_json_files_in_the_checkpoint_and_the_latest_is_in_use(lake):
    uri = _store(lake, V0, V1)
    assert json.loads((lake.checkpoint_root / "sales" / "schemas" / "1").read_text()) == V1.model_dump()
    assert history(uri) == [V0, V1]
    spec, version = stored_spec(parse_spec(spec_data(format="json")), uri)
    assert (spec.source.schema_, version) == ("id BIGINT, zip STRING, coupon STRING", V1)


def test_validate_knows_nothing_of_a_schema_not_inferred_yet(lake):
    assert next_change(parse_spec(spec_data(format="json")), lake) == (None, "")


def test_sluice_schema_prints_each_version_with_its_ddl_and_the_run_that_made_it(lake, capsys):
    write_spec(lake.pipelines_dir, spec_data(format="json"))
    assert main(["schema", "sales"]) == 0
    checkpoint = lake.checkpoint_root / "sales"
    assert capsys.readouterr().out == (
        f"sales: no stored schema yet in {checkpoint}: the first run infers it from the files in "
        f"{lake.lake_root / 'landing' / 'sales'} (sluice run sales --dry-run shows what it would infer)\n")

    _store(lake, V0, V1)
    assert main(["schema", "sales"]) == 0
    assert capsys.readouterr().out == (
        f"sales: 2 version(s) stored in {checkpoint}/schemas, version 1 in use\n"
        "version 0  2026-11-26T10:00:00+00:00  run run-a  inferred from 1 file(s) with hints zip STRING\n"
        "  id BIGINT, zip STRING\n"
        "  sampled: /lake/landing/sales/1.json\n"
        "version 1  2026-11-26T11:00:00+00:00  run run-b  add_columns coupon (batch 3)\n"
        "  id BIGINT, zip STRING, coupon STRING\n")
    assert main(["schema", "sales", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["versions"] == [V0.model_dump(), V1.model_dump()]


def test_sluice_schema_of_a_declared_schema_says_so(lake, capsys):
    write_spec(lake.pipelines_dir, spec_data(format="json", schema="id BIGINT"))
    assert main(["schema", "sales"]) == 0
    assert capsys.readouterr().out == "sales: the spec declares the source's schema, nothing is inferred: id BIGINT\n"


def kafka_data(**value) -> dict:
    return {"name": "sales", "source": {"format": "kafka", "bootstrap_servers": "localhost:9092", "topics": ["sales"],
                                        "value": {"format": "json", **value}}}


def test_a_kafka_json_value_needs_no_schema_and_with_schema_sets_the_value_schema(lake):
    spec = parse_spec(kafka_data(schema_hints="amount DECIMAL(12,2)", inference={"max_records": 10}))
    assert (spec.source.value.schema_, spec.source.infers_schema(), infers_schema(spec)) == (None, True, True)
    assert (spec.source.value.inference.max_records, schema_hints(spec)) == (10, "amount DECIMAL(12,2)")
    assert parse_spec(kafka_data()).source.value.inference is None  # default: max_records 1000 when inferring
    assert infers_schema(parse_spec(kafka_data(schema="id BIGINT"))) is False
    assert infers_schema(parse_spec({**kafka_data(), "source": {**kafka_data()["source"],
                                                               "value": {"format": "string"}}})) is False
    assert with_schema(spec, "id BIGINT").source.value.schema_ == "id BIGINT"

    checkpoint = Checkpoint(spec.checkpoint_path(lake))
    v0 = SchemaVersion(version=0, ddl="amount DECIMAL(12,2), id BIGINT", created_at="2026-11-26T10:00:00+00:00",
                       run_id="run-a", reason="inferred", records=3, topics=["sales"], hints="amount DECIMAL(12,2)")
    checkpoint.write_schema(v0.model_dump())
    read, version = stored_spec(spec, checkpoint.uri)
    assert (read.source.value.schema_, version) == ("amount DECIMAL(12,2), id BIGINT", v0)
    assert next_change(spec, lake) == (None, "")  # no table yet


@pytest.mark.parametrize(("value", "message"), [
    ({"schema": "a INT", "schema_hints": "a BIGINT"},
     "source.value.schema_hints: apply to an inferred schema; with a declared schema, write the types in schema"),
    ({"schema": "a INT", "inference": {"max_records": 5}},
     "source.value.inference: the schema is declared, nothing is inferred; remove inference"),
    ({"format": "string", "schema_hints": "a INT"},
     r"source.value.schema_hints: only for json values without a schema \(nothing is inferred for string "
     r"values\); remove schema_hints"),
    ({"format": "string", "inference": {"max_records": 5}},
     r"source.value.inference: only for json values without a schema \(nothing is inferred for string values\)"),
    ({"format": "avro", "schema_file": "x.avsc", "wire_format": "plain", "schema_hints": "a INT"},
     r"source.value.schema_hints: only for json values without a schema \(nothing is inferred for avro values\)"),
    ({"schema_hints": "offset BIGINT"}, r"source.value.schema_hints: column\(s\) offset clash with the columns "
                                        "sluice adds for every record"),
    ({"schema_hints": "a INT, A BIGINT"}, r"source.value.schema_hints: column\(s\) a hinted twice"),
    ({"inference": {"max_records": 0}}, "source.value.inference.max_records: Input should be greater than 0"),
    ({"inference": {"max_files": 5}}, "source.value.inference.max_files: unknown field"),
])
def test_bad_kafka_inference_fields_name_the_field_and_the_fix(value, message):
    with pytest.raises(SpecError, match=message):
        parse_spec(kafka_data(**value), "sales.yaml")


def test_sluice_schema_of_a_kafka_pipeline_says_where_it_infers_from_and_shows_the_records_sampled(lake, capsys):
    write_spec(lake.pipelines_dir, kafka_data())
    assert main(["schema", "sales"]) == 0
    checkpoint = lake.checkpoint_root / "sales"
    assert capsys.readouterr().out == (
        f"sales: no stored schema yet in {checkpoint}: the first run infers it from the records of topic(s) sales "
        "(sluice run sales --dry-run shows what it would infer)\n")
    v0 = SchemaVersion(version=0, ddl="id BIGINT", created_at="2026-11-26T10:00:00+00:00", run_id="run-a",
                       reason="inferred", records=3, topics=["sales"])
    Checkpoint(str(checkpoint)).write_schema(v0.model_dump())
    assert main(["schema", "sales"]) == 0
    assert capsys.readouterr().out == (
        f"sales: 1 version(s) stored in {checkpoint}/schemas, version 0 in use\n"
        "version 0  2026-11-26T10:00:00+00:00  run run-a  inferred from 3 record(s) of sales\n"
        "  id BIGINT\n")
    write_spec(lake.pipelines_dir, kafka_data(schema="id BIGINT"))
    assert main(["schema", "sales"]) == 0
    assert capsys.readouterr().out == "sales: the spec declares the source's schema, nothing is inferred: id BIGINT\n"
