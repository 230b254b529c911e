"""The spec's ``transform:``: the watermark, dedupe, reference tables and the SQL over the source."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import (
    Field,
    field_validator,
    model_validator,
)

from sluice.spec.common import _INTERVAL_RE, NAME_PATTERN, OptionValue, _Model


class Watermark(_Model):
    """Event-time watermark applied to the source before the transform's SQL."""

    column: str
    """The event-time column (a TIMESTAMP in the source schema)."""
    delay: str
    """How late data may arrive, as a Spark interval: ``10 minutes``, ``1 hour``."""

    @field_validator("delay")
    @classmethod
    def _interval(cls, value: str) -> str:
        if not _INTERVAL_RE.match(value):
            raise ValueError(f"{value!r} is not an interval; write it like '10 minutes' or '1 hour'")
        return value.strip()


class ReferenceTable(_Model):
    """A small static table the transform's SQL can join (a stream-static join), read once per run."""

    format: Literal["csv", "json", "parquet", "delta"]
    """The table's format: ``csv``, ``json``, ``parquet`` or ``delta``."""
    path: str
    """Relative to the project folder (``SLUICE_HOME``, e.g. ``include/reference/regions.csv``), or absolute."""
    schema_: str | None = Field(default=None, alias="schema")
    """Spark DDL; required for csv and json (nothing is inferred behind your back)."""
    options: dict[str, OptionValue] = Field(default_factory=dict)
    """Passed to Spark's reader as they are (``header: true`` for csv, ...)."""

    @model_validator(mode="after")
    def _schema(self) -> ReferenceTable:
        if self.format in ("csv", "json") and self.schema_ is None:
            raise ValueError(f'schema: required for {self.format} reference tables, e.g. schema: "code STRING, name STRING"')
        return self


class Transform(_Model):
    """Optional SQL over the input stream, which is the temp view ``source``."""

    sql: str | None = None
    """A Spark SQL query reading the temp view ``source``."""
    watermark: Watermark | None = None
    """``{column, delay}``: the event-time watermark, applied to the source before the SQL."""
    dedupe: list[str] | None = None
    """Drop a row whose values of these columns were seen before, within the watermark's delay (Spark's
    dropDuplicatesWithinWatermark): a re-delivered event is ingested once. Needs ``watermark``."""
    tables: dict[str, ReferenceTable] = Field(default_factory=dict)
    """Static tables the SQL can read (joins with a reference table), by temp view name:
    ``{format, path, schema, options}``; relative paths start at the project folder."""

    @field_validator("tables")
    @classmethod
    def _view_names(cls, value: dict[str, ReferenceTable]) -> dict[str, ReferenceTable]:
        for name in value:
            if not re.match(NAME_PATTERN, name) or name == "source":
                raise ValueError(f"{name!r} cannot name a temp view: use lower-case letters, digits and _, not source")
        return value

    @model_validator(mode="after")
    def _dedupe_needs_watermark(self) -> Transform:
        if self.dedupe is not None and not self.dedupe:
            raise ValueError("dedupe: name the columns that identify an event, e.g. dedupe: [order_id]")
        if self.dedupe and self.watermark is None:
            raise ValueError(
                "dedupe: needs a watermark (transform.watermark): without one, Spark would remember every key "
                "forever; the watermark's delay is how long a duplicate can arrive after the first copy"
            )
        return self

    @field_validator("sql")
    @classmethod
    def _reads_source(cls, value: str | None) -> str | None:
        if value is not None and not re.search(r"\bsource\b", value, re.IGNORECASE):
            raise ValueError("the query must read the input stream, the temp view `source` (… FROM source)")
        return value
