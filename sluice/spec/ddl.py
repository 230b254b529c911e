"""A small checker for Spark DDL schema strings, so a typo fails at validation, not in the JVM.

It accepts what ``StructType.fromDDL`` accepts for the common cases (``name TYPE [NOT NULL]
[COMMENT '...']``, nested ``ARRAY<>``, ``MAP<,>``, ``STRUCT<>``, ``DECIMAL(p,s)``). Spark parses the
schema again at run time and stays the judge of anything exotic.
"""

from __future__ import annotations

import re

_PRIMITIVES = {
    "string", "varchar", "char", "binary", "boolean", "bool",
    "tinyint", "byte", "smallint", "short", "int", "integer", "bigint", "long",
    "float", "real", "double", "decimal", "dec", "numeric",
    "date", "timestamp", "timestamp_ntz", "timestamp_ltz", "variant", "void", "interval",
}
_PARAMETERISED = {"varchar", "char", "decimal", "dec", "numeric"}
_NAME_RE = re.compile(r"^(`[^`]+`|[A-Za-z_][A-Za-z0-9_]*)$")


class DdlError(ValueError):
    pass


def split_top_level(text: str, sep: str = ",") -> list[str]:
    """Split on ``sep`` outside <>, () and quotes."""
    parts, depth, current, quote = [], 0, [], None
    for ch in text:
        if quote:
            current.append(ch)
            if ch == quote:
                quote = None
            continue
        if ch in "'`\"":
            quote = ch
        elif ch in "<(":
            depth += 1
        elif ch in ">)":
            depth -= 1
            if depth < 0:
                raise DdlError(f"unbalanced {ch!r}")
        if ch == sep and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(ch)
    if depth != 0 or quote:
        raise DdlError("unbalanced brackets or quotes")
    parts.append("".join(current))
    return parts


def nested(text: str) -> tuple[str, str] | None:
    """``ARRAY<...>``, ``MAP<...>`` or ``STRUCT<...>``: its kind (lower case) and what is between its brackets;
    None for any other type."""
    t = text.strip()
    m = re.match(r"^(array|map|struct)\s*<(.*)>$", t.lower(), re.DOTALL)
    return (m.group(1), t[t.index("<") + 1 : t.rindex(">")]) if m else None


def struct_fields(inner: str) -> list[tuple[str, str]]:
    """A STRUCT's fields (``name: TYPE`` or ``name TYPE``, options after the type) as (name, the rest)."""
    fields = []
    for field in split_top_level(inner):
        name, sep, rest = field.strip().partition(":")
        if not sep:
            name, _, rest = field.strip().partition(" ")
        fields.append((name, rest))
    return fields


def check_type(text: str) -> None:
    t = text.strip()
    lower = t.lower()
    found = nested(t)
    if found:
        kind, inner = found
        if kind == "array":
            check_type(inner)
        elif kind == "map":
            kv = split_top_level(inner)
            if len(kv) != 2:
                raise DdlError(f"MAP needs a key and a value type: {t!r}")
            for part in kv:
                check_type(part)
        else:
            for name, ftype in struct_fields(inner):
                _check_field(name, ftype, t)
        return
    m = re.match(r"^([a-z_]+)\s*(\((\s*\d+\s*(,\s*\d+\s*)?)\))?$", lower)
    if m and m.group(1) in _PRIMITIVES and (m.group(2) is None or m.group(1) in _PARAMETERISED):
        return
    if lower.startswith("interval "):
        return
    raise DdlError(f"unknown type {t!r}")


def _check_field(name: str, rest: str, context: str) -> None:
    name = name.strip()
    if not _NAME_RE.match(name):
        raise DdlError(f"bad column name {name!r} in {context!r}")
    rest = re.sub(r"(?i)\s+comment\s+'(?:[^'\\]|\\.)*'\s*$", "", rest.strip())
    rest = re.sub(r"(?i)\s+not\s+null\s*$", "", rest)
    if not rest.strip():
        raise DdlError(f"column {name!r} has no type")
    check_type(rest)


def parse_ddl_schema(ddl: str) -> list[tuple[str, str]]:
    """Check ``ddl`` and return its top-level ``(column, type)`` pairs."""
    if not ddl.strip():
        raise DdlError("empty schema")
    columns = []
    for field in split_top_level(ddl):
        field = field.strip()
        if not field:
            raise DdlError("empty column (a stray comma?)")
        parts = field.split(None, 1)
        if len(parts) < 2:
            raise DdlError(f"column {field!r} has no type (write it as `name TYPE`)")
        _check_field(parts[0], parts[1], field)
        columns.append((parts[0].strip("`"), parts[1].strip()))
    return columns
