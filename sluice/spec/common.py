"""What every part of the spec shares: names, patterns, the model base, durations, paths."""

from __future__ import annotations

import posixpath
import re
from pathlib import Path
from typing import Literal

from pydantic import (
    BaseModel,
    ConfigDict,
)

from sluice.spec.ddl import DdlError, parse_ddl_schema

NAME_PATTERN = r"^[a-z][a-z0-9_]*$"
# Spark's interval strings as accepted by withWatermark / window: "10 minutes", "1 hour", "30 seconds"
_INTERVAL_RE = re.compile(
    r"^\s*\d+\s*(microseconds?|milliseconds?|seconds?|minutes?|hours?|days?|weeks?)\s*$", re.IGNORECASE
)
_STATEFUL_SQL_RE = re.compile(r"\bgroup\s+by\b|\bdistinct\b|\bwindow\s*\(|\bjoin\b", re.IGNORECASE)


def stateful_sql(sql: str | None) -> bool:
    """SQL that keeps state across micro-batches in a streaming query: an aggregation, DISTINCT, a window,
    a join. The one definition: :meth:`PipelineSpec.is_stateful` adds the watermark and dedupe."""
    return bool(sql and _STATEFUL_SQL_RE.search(sql))

SCHEDULE_PRESETS = ("@once", "@continuous", "@hourly", "@daily", "@weekly", "@monthly", "@quarterly", "@yearly")

Trigger = Literal["available_now", "once"]
FileFormat = Literal["json", "csv", "parquet", "text"]
SinkMode = Literal["append", "complete", "merge", "scd2"]
OnBadRecords = Literal["quarantine", "fail", "drop"]
OnViolation = Literal["warn", "drop", "quarantine", "fail"]
SchemaEvolution = Literal["rescue", "add_columns", "fail"]
OnOverwrite = Literal["warn", "fail", "reingest"]
RESCUED_COLUMN = "_rescued"
"""JSON sources: the fields of a record that the schema does not declare, as a JSON object (null if none)."""
SCD2_START = "__start_at"
"""``scd2`` sinks: the ``sequence_by`` value of the change that started a version of a key."""
SCD2_END = "__end_at"
"""``scd2`` sinks: the ``sequence_by`` value of the change that ended a version (the next version's start, or
the deletion's); NULL for the key's current version."""
OptionValue = str | int | float | bool


def _ddl_columns(ddl: str) -> list[tuple[str, str]]:
    try:
        return parse_ddl_schema(ddl)
    except DdlError as err:
        raise ValueError(f"not a Spark DDL schema: {err}") from None


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True, use_attribute_docstrings=True)


CleanMode = Literal["archive", "delete"]


DURATION = re.compile(r"^\s*(\d+)\s*(s|m|h|d)\s*$")
DURATION_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def duration_seconds(text: str) -> int:
    """``90s``, ``30m``, ``2h``, ``1d`` as seconds; ValueError otherwise."""
    found = DURATION.match(str(text))
    if found is None:
        raise ValueError(f"{text!r} is not a duration: write a number and a unit, e.g. 30m, 2h, 1d (units: s, m, h, d)")
    return int(found[1]) * DURATION_UNITS[found[2]]


def _truthy(value: OptionValue | None) -> bool:
    return str(value).strip().lower() == "true"


TABLE_NAME_PATTERN = re.compile(r"^(?:spark_catalog\.)?([a-z_][a-z0-9_]*)\.([a-z_][a-z0-9_]*)$")
SESSION_CATALOG = "spark_catalog"


def table_name(value: str) -> str:
    """A table's name as the spec gives it (``bronze.orders`` or ``spark_catalog.bronze.orders``), checked and
    normalised to ``schema.table`` in lower case (Hive's metastore keeps names in lower case)."""
    found = TABLE_NAME_PATTERN.match(value.strip().lower())
    if not found:
        raise ValueError(
            f"{value!r} is not a table name: give schema.table (e.g. bronze.orders), letters, digits and _, "
            f"starting with a letter or _; a catalog in front may only be {SESSION_CATALOG} (the session catalog "
            "the names are registered in)")
    return f"{found.group(1)}.{found.group(2)}"


def _resolve(path: str, root: Path | str) -> str:
    if "://" in path:  # a URI (s3a://, abfss://, file://): used as it is
        return path
    candidate = Path(path).expanduser()
    if candidate.is_absolute():
        return str(candidate)
    if not isinstance(root, Path):  # a root on an object store: the path is a key under it
        return posixpath.join(root.rstrip("/"), posixpath.normpath(path))
    return str((root / candidate).resolve())
