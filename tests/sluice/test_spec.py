"""The spec contract: valid specs load with defaults, invalid ones name the file, the field and the fix."""

from __future__ import annotations

from pathlib import Path

import pytest

from sluice.settings import load_settings
from sluice.spec import SpecError, load_spec, parse_spec
from sluice.spec.catalog import PipelineCatalog
from tests.helpers import orders_spec, write_spec

PROJECT = Path(__file__).resolve().parents[2]


def test_issue_example_spec_loads_with_every_documented_field():
    # Given the spec of the foundation issue, field for field
    data = {
        "name": "orders_bronze",
        "schedule": "@hourly",
        "trigger": "available_now",
        "source": {
            "format": "json",
            "path": "landing/orders",
            "schema": "id BIGINT, ts TIMESTAMP, customer STRING, amount DOUBLE",
            "options": {},
            "max_files_per_trigger": None,
        },
        "transform": {
            "sql": "SELECT *, to_date(ts) AS day FROM source",
            "watermark": {"column": "ts", "delay": "10 minutes"},
        },
        "sink": {"path": "bronze/orders", "mode": "append", "partition_by": ["day"]},
        "checkpoint": None,
    }
    # When it is validated
    spec = parse_spec(data)
    # Then every field is there as written
    assert spec.name == "orders_bronze"
    assert spec.source.schema_ == "id BIGINT, ts TIMESTAMP, customer STRING, amount DOUBLE"
    assert spec.transform.watermark.delay == "10 minutes"
    assert spec.sink.partition_by == ["day"]


def test_defaults_derive_table_and_checkpoint_from_the_name(lake):
    spec = parse_spec({"name": "clicks", "source": {"format": "text", "path": "/data/clicks"}})
    assert spec.trigger == "available_now"
    assert spec.sink.mode == "append"
    assert spec.source_path(lake) == "/data/clicks"
    assert spec.sink_path(lake) == str(lake.lake_root / "clicks")
    assert spec.checkpoint_path(lake) == str(lake.checkpoint_root / "clicks")


def test_absolute_checkpoint_is_kept(lake, tmp_path):
    spec = parse_spec(orders_spec(checkpoint=str(tmp_path / "ck")))
    assert spec.checkpoint_path(lake) == str(tmp_path / "ck")


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"name": "Orders-Bronze"}, "name: 'Orders-Bronze' must match ^[a-z][a-z0-9_]*$"),
        ({"trigger": "continuous"}, "trigger: 'continuous' is not allowed; use one of: available_now, once"),
        ({"source": {"format": "xml", "path": "x", "schema": "a INT"}},
         "source.format: 'xml' is not allowed; use one of: json, csv, parquet, text, kafka"),
        ({"source": {"format": "json", "path": "x", "schema": "a INT", "schema_hints": "a BIGINT"}},
         "source.schema_hints: apply to an inferred schema; with a declared schema, write the types in schema"),
        ({"source": {"format": "text", "path": "x", "schema": "a INT"}},
         "source.schema: text sources always have the one column `value STRING`"),
        ({"source": {"format": "json", "path": "x", "schema": "id BIGNT"}},
         "source.schema: not a Spark DDL schema: unknown type 'BIGNT'"),
        ({"source": {"format": "json", "path": "x", "schema": "id BIGINT, , ts TIMESTAMP"}},
         "source.schema: not a Spark DDL schema: empty column"),
        ({"source": {"format": "csv", "path": "x", "schema": "a INT", "max_files_per_trigger": 0}},
         "source.max_files_per_trigger: Input should be greater than 0"),
        ({"sink": {"mode": "upsert"}}, "sink.mode: 'upsert' is not allowed; use one of: append, complete, merge"),
        ({"sink": {"mode": "merge"}}, "sink.keys: required with mode: merge; name the key columns, e.g. keys: [order_id]"),
        ({"sink": {"keys": ["id"]}}, "sink.keys: only used with mode: merge (the sink's mode is append)"),
        ({"sink": {"mode": "merge", "keys": ["id"], "optimize_write": True}},
         "sink.optimize_write: used by append and complete sinks; a merge sink's MERGE already writes by partition"),
        ({"sink": {"mode": "merge", "keys": ["id"], "order_by": "id"}}, "sink.order_by: 'id' is a key column"),
        ({"sink": {"mode": "complete"}}, "sink.mode: complete needs a transform.sql with an aggregation"),
        ({"transform": {"sql": "SELECT 1"}}, "transform.sql: the query must read the input stream"),
        ({"transform": {"watermark": {"column": "ts", "delay": "ten minutes"}}},
         "transform.watermark.delay: 'ten minutes' is not an interval"),
        ({"sorce": {}}, "sorce: unknown field; check its spelling"),
        ({"schedule": "every hour"}, "schedule: 'every hour' is neither a cron expression ('0 * * * *') nor one of"),
        ({"schedule": "61 * * * *"}, "schedule: '61 * * * *' is neither a cron expression"),
    ],
)
def test_invalid_spec_names_file_field_and_what_is_allowed(change, message):
    with pytest.raises(SpecError) as caught:
        parse_spec({**orders_spec(), **change}, "include/pipelines/orders.yaml")
    assert f"include/pipelines/orders.yaml: {message}" in str(caught.value)


@pytest.mark.parametrize("schedule", [None, "@hourly", "@continuous", "*/15 * * * *", "0 6 * * 1-5"])
def test_airflow_schedules_are_accepted(schedule):
    assert parse_spec({**orders_spec(), "schedule": schedule}).schedule == schedule


def test_missing_required_fields_are_each_reported():
    with pytest.raises(SpecError) as caught:
        parse_spec({"schedule": "@daily"}, "s.yaml")
    assert str(caught.value).splitlines() == ["s.yaml: name: is required", "s.yaml: source: is required"]


def test_yaml_syntax_error_names_the_file(tmp_path):
    path = tmp_path / "broken.yaml"
    path.write_text("name: [unclosed\nsink: x\n")
    with pytest.raises(SpecError, match=r"broken.yaml: not valid YAML") as caught:
        load_spec(path)
    # read by libyaml first, the message is still the pure-Python parser's: the line and a caret under the fault
    assert "expected ',' or ']', but got ':'" in str(caught.value)
    assert "    sink: x\n        ^" in str(caught.value)


def test_a_spec_that_is_not_a_mapping_is_refused(tmp_path):
    path = tmp_path / "list.yaml"
    path.write_text("- a\n- b\n")
    with pytest.raises(SpecError, match=r"list.yaml: the spec must be a YAML mapping of fields, not list"):
        load_spec(path)


def test_pipeline_dir_keeps_good_specs_and_reports_bad_and_duplicate_ones(tmp_path):
    write_spec(tmp_path, orders_spec(name="good"))
    write_spec(tmp_path, orders_spec(name="twin"), "twin_a.yaml")
    write_spec(tmp_path, orders_spec(name="twin"), "twin_b.yaml")
    write_spec(tmp_path, orders_spec(name="bad", trigger="never"))
    catalog = PipelineCatalog.load(tmp_path)
    specs, errors = catalog.specs, catalog.errors
    assert [s.name for s in specs.values()] == ["good"]
    messages = sorted(str(e) for e in errors)
    assert len(messages) == 3
    assert "bad.yaml: trigger: 'never' is not allowed" in messages[0]
    assert "twin_a.yaml: name: 'twin' is also used by" in messages[1]
    assert "twin_b.yaml: name: 'twin' is also used by" in messages[2]


def test_trigger_once_with_stateful_append_query_warns():
    spec = parse_spec({
        "name": "windows", "trigger": "once",
        "source": {"format": "json", "path": "x", "schema": "ts TIMESTAMP, word STRING"},
        "transform": {"watermark": {"column": "ts", "delay": "10 minutes"},
                      "sql": "SELECT window(ts, '10 minutes'), count(*) FROM source GROUP BY 1"},
    })
    assert len(spec.warnings()) == 1
    assert "Trigger.Once runs no no-data batch" in spec.warnings()[0]
    assert parse_spec({**spec.model_dump(by_alias=True), "trigger": "available_now"}).warnings() == []


def test_every_shipped_sample_spec_is_valid():
    catalog = PipelineCatalog.load(PROJECT / "include" / "pipelines")
    specs, errors = catalog.specs, catalog.errors
    assert errors == []
    assert {s.name for s in specs.values()} >= {"orders_bronze", "customers_csv", "word_count", "events_windowed"}


def test_lake_and_checkpoint_roots_come_from_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("SLUICE_LAKE_ROOT", str(tmp_path / "l"))
    monkeypatch.setenv("SLUICE_CHECKPOINT_ROOT", str(tmp_path / "c"))
    settings = load_settings()
    assert settings.lake_root == tmp_path / "l"
    assert settings.checkpoint_root == tmp_path / "c"


KAFKA = {"format": "kafka", "bootstrap_servers": "127.0.0.1:9092", "topics": ["orders"]}


def test_kafka_source_defaults():
    spec = parse_spec({"name": "k", "source": KAFKA})
    assert spec.source.starting_offsets == "earliest"
    assert spec.source.fail_on_data_loss is True
    assert spec.source.value.format == "string"
    assert spec.source.timeout_seconds == 30


def test_kafka_starting_offsets_accept_json_per_partition():
    spec = parse_spec({"name": "k", "source": {**KAFKA, "starting_offsets": {"orders": {"0": 5, "1": -2}}}})
    assert spec.source.starting_offsets == '{"orders": {"0": 5, "1": -2}}'


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"topics": None}, "source.topics: name the topics (topics: [orders]) or a subscribe_pattern, exactly one"),
        ({"subscribe_pattern": "o.*"}, "source.topics: name the topics"),
        ({"bootstrap_servers": None}, "source.bootstrap_servers: required (host:port), unless connection names"),
        ({"starting_offsets": "beginning"}, "source.starting_offsets: 'beginning' is not allowed; use earliest, latest"),
        ({"value": {"format": "string", "schema_hints": "a INT"}},
         "source.value.schema_hints: only for json values without a schema"),
        ({"value": {"format": "protobuf"}},
         "source.value.format: 'protobuf' is not allowed; use one of: json, string, avro"),
        ({"value": {"format": "json", "schema": "id BIGINT, offset BIGINT"}},
         "source.value.schema: column(s) offset clash with the columns sluice adds"),
        ({"options": {"subscribe": "x"}}, "source.options: subscribe are set from the spec's own fields"),
        ({"path": "x"}, "source.path: unknown field"),
    ],
)
def test_invalid_kafka_source(change, message):
    with pytest.raises(SpecError) as caught:
        parse_spec({"name": "k", "source": {**KAFKA, **change}}, "k.yaml")
    assert f"k.yaml: {message}" in str(caught.value)


JSON_SOURCE = {"format": "json", "path": "landing/o", "schema": "id BIGINT, amount DOUBLE"}


def test_data_quality_defaults_are_the_cautious_ones():
    spec = parse_spec({"name": "q", "source": JSON_SOURCE})
    assert (spec.on_bad_records, spec.schema_evolution, spec.expectations) == ("quarantine", "rescue", [])
    assert spec.quarantine_path is None


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"on_bad_records": "ignore"}, "on_bad_records: 'ignore' is not allowed; use one of: quarantine, fail, drop"),
        ({"expectations": [{"name": "a", "rule": "x > 0"}, {"name": "a", "rule": "y > 0"}]},
         "expectations: the name(s) a are used twice; names are unique"),
        ({"expectations": [{"name": "a", "rule": "x > 0", "on_violation": "skip"}]},
         "expectations.0.on_violation: 'skip' is not allowed; use one of: warn, drop, quarantine, fail"),
        ({"expectations": [{"name": "a", "rule": "  "}]}, "expectations.0.rule: a Spark SQL boolean is required"),
        ({"schema_evolution": "merge"}, "schema_evolution: 'merge' is not allowed; use one of: rescue, add_columns, fail"),
        ({"source": {**JSON_SOURCE, "on_overwrite": "ignore"}},
         "source.on_overwrite: 'ignore' is not allowed; use one of: warn, fail, reingest"),
        ({"source": {**JSON_SOURCE, "format": "csv"}, "schema_evolution": "add_columns"},
         "schema_evolution: add_columns applies to JSON sources (json files, Kafka json values), not to csv"),
        ({"schema_evolution": "add_columns", "transform": {"sql": "SELECT id, count(*) FROM source GROUP BY id"}},
         "schema_evolution: add_columns cannot add columns to a stateful query's result"),
        ({"source": {**JSON_SOURCE, "schema": "id BIGINT, _rescued STRING"}},
         "source.schema: column _rescued is the column sluice adds for the fields a JSON record has beyond"),
    ],
)
def test_invalid_data_quality_fields(change, message):
    with pytest.raises(SpecError) as caught:
        parse_spec({"name": "q", "source": JSON_SOURCE, **change}, "q.yaml")
    assert f"q.yaml: {message}" in str(caught.value)


@pytest.mark.parametrize(("previous", "message"), [
    (["a", "a"], "previous_names: a is given twice; list each earlier name once, oldest first"),
    (["q"], "previous_names: q is the pipeline's name now, not an earlier one; list only the names it had before"),
    (["Old-Name"], "previous_names.0: "),
])
def test_previous_names_are_earlier_valid_names_each_once(previous, message):
    with pytest.raises(SpecError) as err:
        parse_spec({"name": "q", "source": JSON_SOURCE, "previous_names": previous})
    assert message in str(err.value)


def test_a_renamed_pipelines_state_stays_under_its_first_name(tmp_path):
    settings = load_settings({"SLUICE_HOME": str(tmp_path)})
    renamed = parse_spec({"name": "c", "previous_names": ["a", "b"], "source": JSON_SOURCE})
    assert (renamed.identity, renamed.names) == ("a", ["a", "b", "c"])
    first = parse_spec({"name": "a", "source": JSON_SOURCE})
    for where in ("sink_path", "checkpoint_path", "quarantine_table_path"):
        assert getattr(renamed, where)(settings) == getattr(first, where)(settings)
    assert renamed.sink_path(settings).endswith("/a")
    pinned = parse_spec({"name": "c", "previous_names": ["a"], "source": JSON_SOURCE, "sink": {"path": "gold/c"},
                         "checkpoint": "cp_c", "quarantine_path": "q/c"})
    assert (pinned.sink_path(settings).endswith("/gold/c"), pinned.checkpoint_path(settings).endswith("/cp_c"),
            pinned.quarantine_table_path(settings).endswith("/q/c")) == (True, True, True)


@pytest.mark.parametrize(
    "change, message",
    [
        ({"look_back": "2h"}, "source.look_back: only used with listing: incremental; set listing: incremental or remove look_back"),
        ({"listing": "incremental", "discovery": "spark"},
         "source.listing: incremental is sluice's discovery (discovery: index)"),
        ({"listing": "incremental", "path": "landing/o/*.json"},
         "source.listing: incremental lists one folder's names after a mark; path landing/o/*.json is a glob: "
         "give the folder as path and keep files by name with options.pathGlobFilter"),
        ({"listing": "incremental", "full_listing_every": 0},
         "source.full_listing_every: give a positive duration (e.g. 1d)"),
        ({"listing": "incremental", "look_back": "a while"}, "source.look_back: 'a while' is not a duration"),
        ({"listing": "sometimes"}, "source.listing: 'sometimes' is not allowed; use one of: full, incremental"),
    ],
)
def test_an_incremental_listing_is_refused_where_it_cannot_keep_its_promise(change, message):
    with pytest.raises(SpecError) as caught:
        parse_spec({"name": "q", "source": {**JSON_SOURCE, **change}}, "q.yaml")
    assert f"q.yaml: {message}" in str(caught.value)


def test_an_incremental_listing_keeps_its_defaults_through_a_dump():
    spec = parse_spec({"name": "q", "source": {**JSON_SOURCE, "listing": "incremental", "look_back": 0}})
    assert (spec.source.look_back, spec.source.full_listing_every) == ("0s", "1d")
    assert parse_spec(spec.model_dump(by_alias=True)) == spec
    assert parse_spec({"name": "q", "source": JSON_SOURCE}).source.listing == "full"  # the default
