"""The JSON field scan (jvm/json, ``spark_jobs.quality.records``): one Jackson pass in place of ``from_json`` into a
map of VARIANT values. It must give what the map parse gave, record for record: the declared columns, the
error (which fields do not fit, or not a JSON object) and ``_rescued`` as ``to_json`` of a VARIANT writes it.
The map parse stays in the code as the reference: each case is run through both and compared, with the
parser options a spec can set. The scan is asked for alone (``single=False``: not the single pass of
``RecordParse``, which holds the scan's answers and has its own tests in test_record_parse.py), and its own
answers are also checked against hand-written ones, error texts spelt out rather than taken from the product.
"""

from __future__ import annotations

import pytest
from pyspark.sql import functions as F

from spark_jobs.quality.records import (
    BAD,
    SCAN_FUNCTION,
    _scan_config,
    field_scan,
    json_columns,
)

SCHEMA = "id BIGINT, ts TIMESTAMP, customer STRING, amount DOUBLE, nested STRUCT<a: INT, b: ARRAY<STRING>>"

VALUES = [
    "1", "-0", "1.50", "1.0", "0.1", "1e10", "1E-3", "1.5e3", "-0.0", "12345678901234567890",
    "123456789012345678901234567890123456789012", "3.141592653589793238462643383279", "1.7976931348623157e308",
    "1e400", "0.000001", "100", "9223372036854775807", "9223372036854775808", "-9223372036854775809", "0.1e1",
    "1.23456789012345678", "01", "NaN", "-Infinity", '"a"', '"\\u00e9"', '"é"', '"a\\/b"', '"tab\\there"',
    '"q\\"uote"', '"\\u0001"', '"<>&\\u2028"', '"\\ud83d\\ude00"', "'single'", '"2026-11-01T10:00:00Z"', "true",
    "false", "null", "[]", "{}", '[1, "a", null, {"b": 2, "a": 1}]', '{"b": 1, "a": 2}',
    '{"z": {"y": 1, "x": [2.50, {"k": "v", "j": null}]}}', '{"a": 1, "a": 2}', '[{"a": 1, "a": 2}]',
    '{"a": 7, "b": ["x", "y"]}', '{"a": "7"}',
]

RECORDS = [
    *[f'{{"id": 1, "x": {v}}}' for v in VALUES],  # an undeclared field of every kind
    *[f'{{"id": {v}, "customer": "c"}}' for v in VALUES],  # every kind in a BIGINT field
    *[f'{{"amount": {v}, "y": 2}}' for v in VALUES],  # ... a DOUBLE one
    *[f'{{"customer": {v}}}' for v in VALUES],  # ... a STRING one
    *[f'{{"nested": {v}, "ts": "2026-11-01T10:00:00Z"}}' for v in VALUES],  # ... a STRUCT one
    '{"id": 1, "b": 1, "a": 2}', '{"id": 1, "x": 1, "x": 2}', '{"x": 1, "id": 2, "ID": 3}', '{"id": 1, "Id": 2}',
    '{"id": 1, "": 3}', '{"id": 1, "x y": 1}', '{"id": null, "id": 1}', '{"id": 1, "id": null}',
    '{"id": "x", "id": 1}', '{"a":1} x', '{"a":1}{"b":2}', '{"a":1}  ', '  {"a":1}', "[1,2]", '"s"', "1", " ",
    "{", '{"a":', '{"a":1,}', "{a:1}", "{'a':1}", '{"a":1 /* c */}', '{"a":1} // c', '{"a":"x\ty"}', "null", "{}",
    '{"\\u0069d": 5}', '{"i\\"d": 5, "k\\\\": 1}', '{"id": 1, "amount": "12.5", "extra": [1,{"z":1,"a":[]}]}',
    '{"nested": {"a": 1, "a": 2}}', '{"id": 1, "ts": "not a time", "more": {"k": 1}}', '\ufeff{"id": 1}',
    '{"id": 0012}', '{"amount": NaN, "q": Infinity}', '{"customer": "\\q"}',
]

OPTIONS = [
    {},
    {"allowComments": "true"},
    {"allowUnquotedFieldNames": "true", "allowSingleQuotes": "false"},
    {"allowNumericLeadingZeros": "true", "allowNonNumericNumbers": "false"},
    {"allowBackslashEscapingAnyCharacter": "true", "allowUnquotedControlChars": "true"},
]


def parsed(spark, records: list[str], options: dict[str, str], *, scan: bool) -> list[tuple]:
    df = spark.createDataFrame([(i, r) for i, r in enumerate(records)], "n INT, value STRING")
    # scan=True: the field scan alone (single=False), not the single pass that would otherwise be chosen
    staged, columns, error = json_columns(df, F.col("value"), SCHEMA, options, rescue=True, keep=[F.col("n")],
                                          scan=scan, single=False)
    rows = staged.select("n", *columns, error.alias(BAD)).orderBy("n").collect()
    return [tuple(row) for row in rows]


def test_the_test_session_has_the_field_scan(spark):
    assert field_scan(spark)


@pytest.mark.parametrize("options", OPTIONS, ids=lambda o: ",".join(o) or "defaults")
def test_the_field_scan_gives_what_the_map_parse_gave_on_every_record(spark, options):
    scanned, mapped = parsed(spark, RECORDS, options, scan=True), parsed(spark, RECORDS, options, scan=False)
    assert len(scanned) == len(RECORDS)
    # compared as text: a NaN value is equal to itself there
    different = [(RECORDS[a[0]], a, b) for a, b in zip(scanned, mapped, strict=True) if repr(a) != repr(b)]
    assert different == []


NOT_AN_OBJECT_TEXT = "not a JSON object (malformed, truncated, or not {...})"


def test_what_the_field_scan_gives_on_a_few_records(spark):
    records = ['{"id": 1, "x": {"b": 1.50, "a": [2, {"d": 1, "c": 0.0}]}, "customer": "c"}',
               '{"id": "7", "amount": 2.5, "y": true}',
               '{"id": 2, "x": {"a": 1, "a": 2}}',
               '{"id": 3, "id": "3"}']
    for scan in (True, False):  # the scan, and the map parse it replaces: the same hand-written answers
        rows = parsed(spark, records, {}, scan=scan)
        assert [(r[1], r[3], r[4], r[6], r[7]) for r in rows] == [
            (1, "c", None, '{"x":{"a":[2,{"c":0,"d":1}],"b":1.5}}', None),
            (None, None, 2.5, '{"y":true}', "field(s) that do not fit the schema: id BIGINT"),
            (2, None, None, None, NOT_AN_OBJECT_TEXT),  # a repeated key inside a value: VARIANT refuses it
            (3, None, None, None, "does not fit the schema"),  # a repeated declared key, the second mistyped
        ], scan


def test_the_field_scan_udf_itself_marks_the_declared_fields_present_and_rescues_the_rest(spark):
    """The UDF's own result, struct<present, rescued>: a '1' per declared field that holds a value (null counts
    as absent; the first of a repeated key decides), the undeclared fields in the record's order as to_json
    writes them, and null for a text that is not one JSON object."""
    assert field_scan(spark)
    names = ["id", "ts", "customer", "amount", "nested"]
    records = ['{"id": 1, "customer": null, "zz": [1, 2.50], "aa": {"k": "v"}}',
               '{"amount": 2, "id": null, "id": 5}',
               '{"nested": {"a": 1}, "ts": "t", "customer": "c", "amount": 1, "id": 0}',
               '{"q": "\u00e9", "q": 2}',
               '[1, 2]', '{"id": 1', 'null']
    df = spark.createDataFrame([(i, r) for i, r in enumerate(records)], "n INT, value STRING")
    config = _scan_config(spark, names, {})
    rows = df.select("n", F.call_udf(SCAN_FUNCTION, F.col("value"), F.lit(config)).alias("s")).orderBy("n").collect()
    assert [None if r.s is None else (r.s.present, r.s.rescued) for r in rows] == [
        ("10000", '{"zz":[1,2.5],"aa":{"k":"v"}}'),
        ("00010", None),
        ("11111", None),
        ("00000", '{"q":"é","q":2}'),
        None, None, None,
    ]
