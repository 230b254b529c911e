"""Avro schema files (``.avsc``) of Kafka values: read and checked when the spec is loaded, without a JVM.

The check is structural (JSON, a top-level record, every field a name and a known type, named types defined
before use), enough to name the file and the problem before a run starts; Avro's own parser (spark-avro's,
in the driver) has the last word. The record's fields become the table's columns, so their names must not
clash with the columns sluice adds for every Kafka record.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

PRIMITIVES = {"null", "boolean", "int", "long", "float", "double", "bytes", "string"}
DECODED_FIELD = "__sluice_decoded"
"""Added to the reader schema with default true: a record that decodes has it true, one that does not has it
null (spark-avro's PERMISSIVE mode returns a struct of nulls, not a null, for a body that does not decode)."""
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class AvroSchemaError(ValueError):
    """The schema file is missing or is not an Avro record schema; the message says which and why."""


def read_avro_schema(path: Path, reserved: tuple[str, ...] = ()) -> str:
    """The schema file's text as compact JSON, after checking it is an Avro record schema whose field names
    are not in ``reserved``."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise AvroSchemaError(f"{path} does not exist") from None
    except OSError as err:
        raise AvroSchemaError(f"{path} cannot be read: {err.strerror}") from None
    try:
        schema = json.loads(text)
    except json.JSONDecodeError as err:
        raise AvroSchemaError(f"{path} is not valid JSON: {err}") from None
    problem = _record_problem(schema, reserved)
    if problem:
        raise AvroSchemaError(f"{path} is not a valid Avro record schema: {problem}")
    return json.dumps(schema, separators=(",", ":"))


def reader_schema(schema_json: str) -> str:
    """The schema with :data:`DECODED_FIELD` added (schema resolution fills it with its default)."""
    schema = json.loads(schema_json)
    schema["fields"] = [*schema["fields"], {"name": DECODED_FIELD, "type": "boolean", "default": True}]
    return json.dumps(schema, separators=(",", ":"))


def field_names(schema_json: str) -> list[str]:
    return [f["name"] for f in json.loads(schema_json)["fields"]]


def _record_problem(schema: Any, reserved: tuple[str, ...]) -> str | None:
    if not isinstance(schema, dict) or schema.get("type") != "record":
        return ('the top-level type must be a record ({"type": "record", "name": ..., "fields": [...]}): '
                "its fields become the table's columns")
    problem = _type_problem(schema, set(), "(top level)")
    if problem:
        return problem
    names = [f["name"] for f in schema["fields"]]
    clash = [n for n in names if n.lower() in reserved or n == DECODED_FIELD]
    if clash:
        return (f"field(s) {', '.join(clash)} clash with the columns sluice adds for every record "
                f"({', '.join(reserved)}); rename them")
    return None


def _type_problem(schema: Any, named: set[str], where: str) -> str | None:
    """What is wrong with one Avro type, or None; ``named`` collects the named types defined so far."""
    if isinstance(schema, str):
        if schema in PRIMITIVES or schema in named or schema.rsplit(".", 1)[-1] in named:
            return None
        return f"{where}: unknown type {schema!r} (primitive types: {', '.join(sorted(PRIMITIVES))})"
    if isinstance(schema, list):
        if not schema:
            return f"{where}: an empty union"
        for member in schema:
            problem = _type_problem(member, named, where)
            if problem:
                return problem
        return None
    if not isinstance(schema, dict) or "type" not in schema:
        return f"{where}: a type is a name, a list (union) or an object with a \"type\""
    kind = schema["type"]
    if kind in ("record", "error", "enum", "fixed"):
        name = schema.get("name")
        if not isinstance(name, str) or not all(_NAME.match(part) for part in name.split(".")):
            return f"{where}: a {kind} needs a \"name\" (letters, digits, _)"
        named.add(name.rsplit(".", 1)[-1])
        named.add(name)
    if kind in ("record", "error"):
        fields = schema.get("fields")
        if not isinstance(fields, list):
            return f"{where}: record {schema['name']} needs \"fields\": a list"
        seen = set()
        for field in fields:
            if not isinstance(field, dict) or not isinstance(field.get("name"), str) or "type" not in field:
                return f"{where}: every field of record {schema['name']} needs a \"name\" and a \"type\""
            if not _NAME.match(field["name"]):
                return f"field {field['name']!r}: a name is letters, digits and _, not starting with a digit"
            if field["name"] in seen:
                return f"record {schema['name']}: field {field['name']!r} is declared twice"
            seen.add(field["name"])
            problem = _type_problem(field["type"], named, f"field {field['name']!r}")
            if problem:
                return problem
        return None
    if kind == "enum":
        symbols = schema.get("symbols")
        ok = isinstance(symbols, list) and symbols and all(isinstance(s, str) for s in symbols)
        return None if ok else f"{where}: enum {schema['name']} needs \"symbols\": a list of names"
    if kind == "fixed":
        return None if isinstance(schema.get("size"), int) else f"{where}: fixed {schema['name']} needs a \"size\""
    if kind == "array":
        return _type_problem(schema["items"], named, where) if "items" in schema else f"{where}: array needs \"items\""
    if kind == "map":
        return _type_problem(schema["values"], named, where) if "values" in schema else f"{where}: map needs \"values\""
    return _type_problem(kind, named, where)
