"""The single pass (jvm/json ``RecordParse``, ``spark_jobs.quality.records``): the declared columns and the field scan
in one expression, the columns from Spark's own JSON parser over the record's bytes (ASCII) or string. It must give what
``from_json`` and the field scan give, record for record: the declared columns (a bad record's partial row
too), the error and ``_rescued``; each case runs through both, with the types and parser options a spec can
set, and in a session time zone other than UTC.
"""

from __future__ import annotations

import pytest
from pyspark.sql import functions as F

from sluice.spec.ddl import parse_ddl_schema
from spark_jobs.quality.records import BAD, _schema_json, json_columns, record_parse
from tests.spark_jobs.test_field_scan import OPTIONS, RECORDS, SCHEMA, VALUES

TYPED = ("i INT, s SMALLINT, t TINYINT, f FLOAT, b BOOLEAN, d DATE, ts TIMESTAMP, ntz TIMESTAMP_NTZ, "
         "dec DECIMAL(10, 2), big DECIMAL(38, 18), bin BINARY, arr ARRAY<STRUCT<k: STRING, v: DOUBLE>>, "
         "deep STRUCT<x: STRUCT<y: ARRAY<BIGINT>>>")

TYPED_VALUES = [
    *VALUES, '"2026-11-01"', '"2026-11-01T10:00:00"', '"2026-11-01 10:00:00.123456"', '"2026-11-01T10:00:00+05:30"',
    '"2026-02-30"', '"11/01/2026"', '"1582-10-10T00:00:00Z"', '"0001-01-01T00:00:00Z"', '"9999-12-31T23:59:59.999999Z"',
    '"12.345"', '"1e2"', "123.456", "99999999.995", "-0.005", '"YWJj"', '"not base64!"', '"NaN"', '"Infinity"', '"-INF"',
    '"true"', "32767", "32768", "127", "128", "-129", "3.4028235e38", "3.5e38", "1e-50",
    '[{"k": "a", "v": 1}, {"k": "b", "v": "x"}, null]', '[{"k": 1}]', '{"x": {"y": [1, "2", 3]}}', '{"x": {"y": 1}}',
    '{"x": null}', '{"x": {"y": [1, 2], "y": [3]}}',
]
TYPED_RECORDS = [
    *[f'{{"{field}": {v}, "z": 1}}' for field, _ in parse_ddl_schema(TYPED) for v in TYPED_VALUES],
    '{"i": 1, "i": "x"}', '{"i": "x", "i": 1}', '{"d": "2026-11-01", "d": null}', '{"ts": 1700000000}',
    '{"ts": 1700000000.5}', '{"ntz": "2026-11-01T10:00:00Z"}', '{"arr": {"k": "a"}}', '{"deep": []}',
]

TYPED_OPTIONS = [
    {},
    {"timestampFormat": "yyyy-MM-dd HH:mm:ss", "dateFormat": "MM/dd/yyyy"},
    {"timestampNTZFormat": "yyyy-MM-dd'T'HH:mm:ss", "allowNonNumericNumbers": "false"},
    {"allowComments": "true", "timestampFormat": "yyyy-MM-dd'T'HH:mm:ss.SSSXXX"},
]


def parsed(spark, records: list[str], schema: str, options: dict[str, str], *, single: bool | None,
           as_text: bool = False) -> list[tuple]:
    df = spark.createDataFrame([(i, r) for i, r in enumerate(records)], "n INT, value STRING")
    staged, columns, error = json_columns(df, F.col("value"), schema, options, rescue=True, keep=[F.col("n")],
                                          scan=True, single=single)
    if as_text:  # every value as Spark writes it (a year-1 timestamp is no Python datetime in every zone)
        columns = [c.cast("string") for c in columns]
    rows = staged.select("n", *columns, error.alias(BAD)).orderBy("n").collect()
    return [tuple(row) for row in rows]


def differences(spark, records: list[str], schema: str, options: dict[str, str], *,
                as_text: bool = False) -> list[tuple]:
    one, two = (parsed(spark, records, schema, options, single=s, as_text=as_text) for s in (True, False))
    assert len(one) == len(records)
    # compared as text: a NaN value is equal to itself there
    return [(records[a[0]], a, b) for a, b in zip(one, two, strict=True) if repr(a) != repr(b)]


def test_the_test_session_has_the_single_pass_for_these_schemas(spark):
    assert record_parse(spark, SCHEMA) and record_parse(spark, TYPED)


@pytest.mark.parametrize("options", OPTIONS, ids=lambda o: ",".join(o) or "defaults")
def test_the_single_pass_gives_what_from_json_and_the_scan_gave_on_every_record(spark, options):
    assert differences(spark, RECORDS, SCHEMA, options) == []


@pytest.mark.parametrize("options", TYPED_OPTIONS, ids=lambda o: ",".join(o) or "defaults")
def test_every_type_and_format_as_from_json_gives_it(spark, options):
    assert differences(spark, TYPED_RECORDS, TYPED, options, as_text=True) == []


def test_timestamps_without_an_offset_are_read_in_the_session_time_zone(spark):
    before = spark.conf.get("spark.sql.session.timeZone")
    spark.conf.set("spark.sql.session.timeZone", "America/New_York")
    try:
        records = ['{"ts": "2026-03-08T02:30:00"}', '{"ts": "2026-11-01T01:30:00"}', '{"d": "2026-11-01", "z": 1}',
                   '{"ts": "2026-11-01T01:30:00Z", "ntz": "2026-11-01T01:30:00"}']
        assert differences(spark, records, TYPED, {}, as_text=True) == []
        rows = parsed(spark, [records[1], records[3]], "ts TIMESTAMP", {}, single=True, as_text=True)
        # as Spark shows them in the session's zone: 01:30 on the day New York's clocks go back is the first
        # one (EDT, UTC-4); the instant 01:30 UTC is 21:30 the evening before
        assert [r[1] for r in rows] == ["2026-11-01 01:30:00", "2026-10-31 21:30:00"]
    finally:
        spark.conf.set("spark.sql.session.timeZone", before)


def test_a_schema_with_a_map_is_parsed_by_from_json(spark):
    schema = "id BIGINT, tags MAP<STRING, INT>"
    assert record_parse(spark, schema) is None
    rows = parsed(spark, ['{"id": 1, "tags": {"a": 1, "b": "x"}}', '{"id": 2, "tags": {"a": 1}, "q": 0}'], schema,
                  {}, single=None)
    assert rows == [(0, 1, None, None, "field(s) that do not fit the schema: tags MAP<STRING, INT>"),
                    (1, 2, {"a": 1}, '{"q":0}', None)]
    with pytest.raises(RuntimeError, match="does not take the schema"):
        parsed(spark, [], schema, {}, single=True)


def test_what_the_single_pass_gives_on_a_few_records(spark):
    records = ['{"id": 1, "x": {"b": 1.50}, "customer": "c", "ts": "2026-11-01T10:00:00Z"}',
               '{"id": "7", "amount": 2.5, "y": true}',
               '{"id": 2, "x": {"a": 1, "a": 2}}',
               "[1, 2]",
               '{"id": "8", "customer": "c", "amount": "lots", "ts": "not a time"}']
    rows = parsed(spark, records, SCHEMA, {}, single=True)
    assert [(r[1], r[2] is not None, r[3], r[4], r[6], r[7]) for r in rows] == [
        (1, True, "c", None, '{"x":{"b":1.5}}', None),
        (None, False, None, 2.5, '{"y":true}', "field(s) that do not fit the schema: id BIGINT"),
        (2, False, None, None, None, "not a JSON object (malformed, truncated, or not {...})"),
        (None, False, None, None, None, "not a JSON object (malformed, truncated, or not {...})"),
        (None, False, "c", None, None, "field(s) that do not fit the schema: id BIGINT, ts TIMESTAMP, amount DOUBLE"),
    ]


def test_the_single_pass_is_planned_once_per_record_under_a_filter_on_its_columns(spark):
    # Spark neither copies the parse into each column that reads it nor pushes the good-row filter below it
    # (it would then parse each record twice): one parse in the optimized plan, and the answers are right
    df = spark.createDataFrame([(0, '{"id": 1, "x": 2}'), (1, '{"id": "a"}'), (2, '{"id": 3}')], "n INT, value STRING")
    staged, columns, error = json_columns(df, F.col("value"), SCHEMA, {}, rescue=True, keep=[F.col("n")])
    good = staged.select("n", *columns, error.alias(BAD)).where(F.col(BAD).isNull())
    plan = good._jdf.queryExecution().optimizedPlan().toString()
    assert plan.count("sluice_record_parse(") == 1, plan
    assert [(r["n"], r["id"], r["_rescued"]) for r in good.orderBy("n").collect()] == [(0, 1, '{"x":2}'), (2, 3, None)]


def test_records_of_any_bytes_as_from_json_reads_them(spark):
    # a record with a byte past ASCII from its decoded string, as from_json reads it: invalid UTF-8 is replaced,
    # not rejected, and a character of several bytes is one character. An ASCII record is read from its bytes
    # (in the row's own buffer): a NUL byte in it (which Jackson's encoding detection reads as UTF-16 or -32) and a
    # STRING field holding a number or an object (which Spark's parser reads back from the exact bytes it is given,
    # and writes again from characters) still answer as from_json does
    records = [b'{"id": 1, "customer": "\xff\xfe"}', b'{"id": 2, "customer": "caf\xc3\xa9", "x": "\xe2\x82"}',
               b'{"id": 3, "customer": "\xed\xa0\x80"}', b'{"id": 4, "customer": "\xc0\x80", "amount": 1.5}',
               b'{"id": 5, "\xff": 1}', b'{"id": 6}\xff', b'\xff{"id": 7}', b'{"id": 8, "customer": "plain"}',
               b'{"id": 9, "customer": "a\x00b"}', b'\x00{"id": 10}', b'{"id": 11}\x00\x00', b'\x00\x00\x00{',
               b'{"id": 12, "customer": -0}', b'{"id": 13, "customer": {"a": 1.50, "b": [1e2]}, "x": 1}',
               b'{"id": 14, "customer": 1.0E+2}', b'{"id": 15, "customer": "tab\there"}']
    df = spark.createDataFrame([(i, r) for i, r in enumerate(records)], "n INT, b BINARY")
    df = df.select("n", F.col("b").cast("string").alias("value"))

    def rows(single: bool) -> list[tuple]:
        staged, columns, error = json_columns(df, F.col("value"), SCHEMA, {}, rescue=True, keep=[F.col("n")],
                                              scan=True, single=single)
        return [tuple(r) for r in staged.select("n", *columns, error.alias(BAD)).orderBy("n").collect()]

    one, reference = rows(True), rows(False)
    assert one == reference
    assert one[1][3] == "café" and one[7][3] == "plain" and "\ufffd" in one[0][3]
    # from_json's answers, written again: not the record's own text
    assert one[12][3] == "0" and one[13][3] == '{"a":1.5,"b":[100.0]}' and one[14][3] == "100.0"


@pytest.mark.parametrize("ddl", [
    "id BIGINT, ts TIMESTAMP, customer STRING, amount DOUBLE",
    "a INT, b integer, c SMALLINT, d short, e TINYINT, f byte, g LONG, h FLOAT, i REAL, j BOOLEAN, k DATE",
    "a TIMESTAMP_NTZ, b TIMESTAMP_LTZ, c BINARY, d DECIMAL, e DECIMAL(10, 2), f dec(38,18), g NUMERIC(5)",
    "`quoted` STRING, under_score INT",
])
def test_a_flat_schema_of_simple_types_reaches_the_parse_as_sparks_own_json_of_it(spark, ddl):
    # read by the JVM without Spark's SQL parser: the very schema the DDL gives
    text = _schema_json(parse_ddl_schema(ddl), "TIMESTAMP_LTZ")
    types = spark._jvm.org.apache.spark.sql.types
    assert text is not None
    assert types.DataType.fromJson(text).json() == types.StructType.fromDDL(ddl).asNullable().json()


def test_any_other_schema_reaches_the_parse_as_its_ddl(spark):
    for ddl in ["a ARRAY<INT>", "a STRUCT<b: INT>", "a MAP<STRING, INT>", "`a-b` INT", "a INT NOT NULL",
                "a INT COMMENT 'x'", "a VARCHAR(3)", "a CHAR(2)", "a DECIMAL(39, 0)", "a DECIMAL(5, 6)", "a VARIANT"]:
        assert _schema_json(parse_ddl_schema(ddl), "TIMESTAMP_LTZ") is None, ddl
    # TIMESTAMP as spark.sql.timestampType says
    assert '"timestamp_ntz"' in _schema_json(parse_ddl_schema("ts TIMESTAMP"), "TIMESTAMP_NTZ")
    assert '"timestamp"' in _schema_json(parse_ddl_schema("ts TIMESTAMP"), "TIMESTAMP_LTZ")
