"""The schema comparison behind schema drift (no Spark): Spark DDL and Delta's JSON schema compared column by
column, added and widened columns allowed, anything else refused with the column and both types."""

from __future__ import annotations

import pytest

from sluice.schema.change import compare, from_ddl, from_json, refusal_message, widens


def change(table: str, output: str, **kwargs):
    return compare(from_ddl(table), from_ddl(output), **kwargs)


def test_ddl_and_delta_json_types_compare_equal():
    delta = {"type": "struct", "fields": [
        {"name": "id", "type": "long"}, {"name": "n", "type": "integer"}, {"name": "d", "type": "decimal(10,2)"},
        {"name": "tags", "type": {"type": "array", "elementType": "string", "containsNull": True}},
        {"name": "a", "type": {"type": "struct", "fields": [{"name": "zip", "type": "short"}]}},
    ]}
    ddl = "id LONG, n INTEGER, d DEC(10, 2), tags ARRAY<VARCHAR(3)>, a STRUCT<zip: SMALLINT>"
    assert not compare(from_json(delta), from_ddl(ddl))


@pytest.mark.parametrize(("old", "new", "wider"), [
    ("int", "bigint", True), ("tinyint", "smallint", True), ("float", "double", True), ("int", "double", True),
    ("decimal(5,2)", "decimal(7,2)", True), ("decimal(5,2)", "decimal(7,4)", True),
    ("decimal(5,2)", "decimal(6,4)", False),  # fewer digits before the point
    ("bigint", "int", False), ("double", "float", False), ("bigint", "double", False), ("string", "int", False),
])
def test_widening_follows_delta_type_widening(old, new, wider):
    assert widens(old, new) is wider


def test_added_widened_and_refused_columns_are_named_with_both_types():
    found = change("id INT, amount DOUBLE, customer STRING, a STRUCT<zip: INT>",
                   "id BIGINT, amount FLOAT, client STRING, a STRUCT<zip: INT, city: STRING>, coupon STRING")
    assert found.added == [("client", "STRING"), ("a.city", "STRING"), ("coupon", "STRING")]
    assert found.widened == [("id", "INT", "BIGINT")]
    assert [(r.column, r.old, r.new, r.why) for r in found.refused] == [
        ("amount", "DOUBLE", "FLOAT", "narrowed"),
        ("customer", "STRING", None, "removed, or renamed to client or coupon"),
    ]
    message = refusal_message("orders", "/lake/orders", found)
    assert message.startswith(
        "the output of orders does not fit its table /lake/orders: column amount is DOUBLE in the table and FLOAT "
        "in the output (narrowed): Delta cannot change it without rewriting the table; column customer (STRING) "
        "is in the table but not in the output (removed, or renamed to client or coupon)")
    assert message.endswith("or run once with --reset-checkpoint (Airflow: trigger with mode=reset) to rebuild the "
                            "table from the source with the new schema (the old versions stay in the Delta "
                            "history); or point sink.path at a new table.")


def test_add_columns_mode_keeps_the_columns_it_added_from_the_data():
    assert not change("id BIGINT, coupon STRING", "id BIGINT", keep_extra_columns=True)
    assert change("id BIGINT, coupon STRING", "id BIGINT").refused
