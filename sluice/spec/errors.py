"""What an invalid spec says: the file, the field and what is allowed, one line per problem.

``include/pipelines/orders.yaml: source.format: 'xml' is not allowed; use one of: json, csv, parquet, text``
"""

from __future__ import annotations

import re
from typing import Any


class SpecError(ValueError):
    """A spec that cannot run. The message names the file, the field and what is allowed."""

    def __init__(self, source: str, problems: list[str]):
        self.source = source
        self.problems = problems
        lines = [f"{source}: {p}" for p in problems]
        super().__init__("\n".join(lines))


SOURCE_FORMATS = ("json", "csv", "parquet", "text", "kafka", "delta")


def describe(error: dict[str, Any]) -> str:
    """One pydantic error as ``field.path: problem; what is allowed``."""
    # drop pydantic's own path elements: validator wrappers, and the union member ("kafka", "json", ...)
    loc = [str(p) for p in error["loc"]
           if not str(p).startswith(("function-after", "FileSource", "KafkaSource", "DeltaSource", "AssetSchedule"))]
    if len(loc) >= 2 and loc[0] == "source" and loc[1] in SOURCE_FORMATS:
        del loc[1]
    field = ".".join("schema" if p == "schema_" else p for p in loc) or "(top level)"
    kind = error["type"]
    if kind == "literal_error":
        allowed = error.get("ctx", {}).get("expected", "")
        allowed = allowed.replace("'", "").replace(" or ", ", ")
        return f"{field}: {error['input']!r} is not allowed; use one of: {allowed}"
    if kind == "union_tag_invalid":
        allowed = ", ".join(SOURCE_FORMATS)
        return f"{field}.format: {error['ctx']['tag']!r} is not allowed; use one of: {allowed}"
    if kind == "union_tag_not_found":
        return f"{field}.format: is required; use one of: {', '.join(SOURCE_FORMATS)}"
    if kind == "extra_forbidden":
        return f"{field}: unknown field; check its spelling (fields are documented in README.md, 'Writing a spec')"
    if kind == "missing":
        return f"{field}: is required"
    if kind == "string_pattern_mismatch":
        return f"{field}: {error['input']!r} must match {error.get('ctx', {}).get('pattern')} (lower-case letters, digits, _)"
    message = error["msg"].removeprefix("Value error, ")
    # model validators name the sub-field themselves ("schema: required ..."): prefix the parent path
    sub = re.match(r"^([a-z_.]+): (.*)$", message, re.DOTALL)
    if sub:
        field = sub.group(1) if field == "(top level)" else f"{field}.{sub.group(1)}"
        message = sub.group(2)
    return f"{field}: {message}"
