"""A slice of a table, [start, end) of its date column: how backfills and the rebuilds after an upstream
backfill select it (:func:`slice_predicate`, :func:`delta_slice`) and replace it (:func:`write_slice`), and
what such a commit says of its slice (``sluice_slice``), for the pipelines below."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Callable

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import DateType, StringType, TimestampNTZType, TimestampType

from sluice.contract.request import BackfillSlice
from sluice.storage.checkpoint import Checkpoint
from spark_jobs.batch.transform import apply_transform
from spark_jobs.batch.writer import BatchWriter
from spark_jobs.driver.context import Run
from spark_jobs.driver.errors import (
    BackfillRefused,  # noqa: F401 - raised here, and imported from here
)
from spark_jobs.sinks.table import Target

SLICE_KEY = "sluice_slice"
END_INDEX_MIN = 2 ** 62
"""Delta's offset index past the last file of a version (END_INDEX) is near Long.MaxValue."""


# --- the checkpoint, read only ----------------------------------------------------------------------

def slice_metadata(column: str, slice_: BackfillSlice, predicate: str) -> dict[str, str]:
    """What a backfill's or a rebuild's commit says of its slice (``sluice_slice``), for the pipelines below."""
    return {"column": column, "from": slice_.start.isoformat(), "to": slice_.end.isoformat(),
            "label": slice_.label, "predicate": predicate}


def consumed_through(checkpoint: str) -> int | None:
    """The last upstream version the stream has read completely (the end offset of its last batch done):
    ``reservoirVersion - 1`` at index -1 (nothing of that version read yet). None: no batch done, or a batch
    that ended inside a version (a run that did not finish its catch-up)."""
    offset = Checkpoint(checkpoint).last_offset()
    if not offset or "reservoirVersion" not in offset:
        return None
    version, index = int(offset["reservoirVersion"]), int(offset.get("index", -1))
    if index == -1:
        return version - 1
    return version if index >= END_INDEX_MIN else None


def slice_predicate(spark: SparkSession, table: str, column: str, slice_: BackfillSlice, *,
                    what: str = "the sink table") -> str:
    """The replaceWhere predicate for the slice over the sink's column, by the column's type."""
    fields = {f.name.lower(): f for f in spark.read.format("delta").load(table).schema.fields}
    field = fields.get(column.lower())
    if field is None:
        raise BackfillRefused(
            f"backfill.column: {what} {table} has no column {column!r} (it has: "
            f"{', '.join(f.name for f in fields.values())}); name the column that holds the date of a row"
        )
    quoted = "`" + field.name.replace("`", "``") + "`"
    kind = field.dataType
    if isinstance(kind, DateType | StringType):
        if not slice_.whole_days:
            raise BackfillRefused(
                f"backfill.column: {field.name} holds dates, but the slice {slice_.label} is not whole days; "
                "backfill a @daily pipeline, or give a range of days"
            )
        first, end = slice_.start.date().isoformat(), slice_.end.date().isoformat()
        if isinstance(kind, DateType):
            return f"{quoted} >= DATE'{first}' AND {quoted} < DATE'{end}'"
        return f"{quoted} >= '{first}' AND {quoted} < '{end}'"  # 'YYYY-MM-DD' text sorts as dates do
    if isinstance(kind, TimestampType | TimestampNTZType):
        return (f"{quoted} >= TIMESTAMP'{_ts(slice_.start)}' AND {quoted} < TIMESTAMP'{_ts(slice_.end)}'")
    raise BackfillRefused(
        f"backfill.column: {field.name} is {kind.simpleString()}; a backfill slices by a DATE, TIMESTAMP or "
        "'YYYY-MM-DD' STRING column"
    )


def _ts(value: datetime) -> str:
    return value.strftime("%Y-%m-%d %H:%M:%S")


def delta_slice(spark: SparkSession, upstream: str, version: int, predicate: str) -> tuple[DataFrame, dict[str, Any]]:
    """A Delta source's slice: the upstream table's rows matching ``predicate`` as of ``version`` (the version
    this pipeline's stream has consumed through), and what was read (for the summary)."""
    df = spark.read.format("delta").option("versionAsOf", version).load(upstream).where(predicate)
    return df, {"table": upstream, "version": version, "predicate": predicate}


def sql_literal(value: Any) -> str:
    """A value of a slice column (date, timestamp, text) as a Spark SQL literal."""
    if isinstance(value, datetime):
        return f"TIMESTAMP'{_ts(value)}'"
    if hasattr(value, "isoformat"):
        return f"DATE'{value.isoformat()}'"
    return "'" + str(value).replace("\\", "\\\\").replace("'", "\\'") + "'"


@dataclass(frozen=True)
class SliceWrite:
    """Which rows of the run's table one slice write replaces, and how (:func:`write_slice`)."""

    slice_: BackfillSlice
    column: str
    predicate: str
    """The rows replaced: the slice of ``column`` (:func:`slice_predicate`)."""
    files: list[str] | None = None
    """A backfill of a file source: the files the slice was read from (the quarantine names them)."""
    metadata: dict[str, Any] | None = None
    """More of the commit's metadata (a rebuild's ``sluice_rebuild``) beside its ``sluice_slice``."""
    clip: bool = False
    """An aggregation in append mode, which writes each window once, when the watermark passes it: only the
    values of ``column`` the table already holds are replaced -- a window the stream has not written yet would
    be written twice; the others are deferred (returned as SQL literals) to rebuild once the stream has."""
    values: list[str] | None = None
    """Limit the rebuild to these values (such a deferred rest)."""
    on_deferred: Callable[[list[str]], None] | None = None
    """Gets the deferred values before the commit."""


def write_slice(run: Run, df: DataFrame, what: SliceWrite) -> tuple[Any, list[str]]:
    """Replace the rows of the run's table (``run.target``: a dry run's scratch copy) matching the slice with
    what ``df`` gives through the spec's transform, bad-record handling and expectations, in one commit whose
    metadata names the slice. Returns the writer (its ``stats``) and the values deferred (``what.clip``)."""
    from pyspark.sql import functions as F


    spark, spec, table, column, predicate = run.spark, run.spec, run.target.table, what.column, what.predicate
    quoted = "`" + column.replace("`", "``") + "`"
    deferred: list[str] = []
    transform = True
    if what.values is not None:
        predicate = f"({predicate}) AND {quoted} IN ({', '.join(what.values)})" if what.values else "FALSE"
    if what.clip or what.values is not None:
        out = apply_transform(df, spec.transform)
        if "_metadata" in out.columns:
            out = out.drop("_metadata")
        transform = False
        if what.values is not None:
            out = out.where(F.expr(predicate))
        if what.clip:
            out = out.persist()
            held = {sql_literal(r[0]) for r in spark.read.format("delta").load(table).where(predicate)
                    .select(column).distinct().collect() if r[0] is not None}
            made = {sql_literal(r[0]) for r in out.select(column).distinct().collect() if r[0] is not None}
            deferred = sorted(made - held)
            if deferred:
                predicate = f"({predicate}) AND {quoted} IN ({', '.join(sorted(held))})" if held else "FALSE"
                out = out.where(F.expr(predicate)) if held else out.limit(0)
        df = out
    if what.on_deferred is not None:
        what.on_deferred(deferred)
    meta = {SLICE_KEY: slice_metadata(column, what.slice_, predicate), **(what.metadata or {})}
    writer = BatchWriter(spec, Target(table=table, quarantine=run.target.quarantine, app_id=None,
                                      run_id=run.job.run_id, checkpoint=None, replace_where=predicate,
                                      backfill=what.slice_.label, files=what.files, commit_metadata=meta),
                         transform=transform)
    try:
        if predicate != "FALSE":
            writer(df, 0)
    finally:
        if what.clip:
            df.unpersist()
    return writer, deferred
