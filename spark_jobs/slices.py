"""A slice of a table, [start, end) of its date column: how backfills and the rebuilds after an upstream
backfill select it (:func:`slice_predicate`, :func:`delta_slice`) and replace it (:func:`write_slice`), and
what such a commit says of its slice (``sluice_slice``), for the pipelines below."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Callable

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import DateType, StringType, TimestampNTZType, TimestampType

from sluice.checkpoint import Checkpoint
from sluice.run_request import BackfillSlice
from sluice.spec import PipelineSpec
from spark_jobs import guards
from spark_jobs.batch_writer import BatchWriter, Target
from spark_jobs.transform import apply_transform

SLICE_KEY = "sluice_slice"
END_INDEX_MIN = 2 ** 62
"""Delta's offset index past the last file of a version (END_INDEX) is near Long.MaxValue."""


class BackfillRefused(guards.GuardRefused):
    """The backfill cannot run as asked; nothing was written. The message says why and what to do."""


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


def delta_slice(spark: SparkSession, upstream: str, checkpoint: str, column: str, slice_: BackfillSlice,
                info: dict[str, Any], *, version: int | None = None, predicate: str | None = None) -> DataFrame:
    """A Delta source's slice: the upstream table's rows of the slice as of the version this pipeline's
    stream has consumed through (``version``; read from the checkpoint when not given), by ``predicate``
    (the upstream commit's own) or else by the upstream table's column of the same name."""
    if version is None:
        version = consumed_through(checkpoint)
        if version is None:
            raise BackfillRefused(
                f"the checkpoint {checkpoint} does not say which version of the upstream table {upstream} its "
                "stream has read through (its last run did not finish its catch-up): run it in mode incremental "
                "first, then backfill."
            )
    if predicate is None:
        predicate = slice_predicate(spark, upstream, column, slice_, what="the upstream table")
    info["upstream"] = {"table": upstream, "version": version, "predicate": predicate}
    return spark.read.format("delta").option("versionAsOf", version).load(upstream).where(predicate)


def sql_literal(value: Any) -> str:
    """A value of a slice column (date, timestamp, text) as a Spark SQL literal."""
    if isinstance(value, datetime):
        return f"TIMESTAMP'{_ts(value)}'"
    if hasattr(value, "isoformat"):
        return f"DATE'{value.isoformat()}'"
    return "'" + str(value).replace("\\", "\\\\").replace("'", "\\'") + "'"


def write_slice(spark: SparkSession, spec: PipelineSpec, df: DataFrame, *, table: str, quarantine: str,
                run_id: str, slice_: BackfillSlice, column: str, predicate: str, files: list[str] | None = None,
                metadata: dict[str, Any] | None = None, clip: bool = False, values: list[str] | None = None,
                on_deferred: Callable[[list[str]], None] | None = None) -> tuple[Any, list[str]]:
    """Replace the rows of ``table`` matching ``predicate`` (the slice) with what ``df`` gives through the
    spec's transform, bad-record handling and expectations, in one commit whose metadata names the slice.

    ``clip`` (an aggregation in append mode, which writes each window once, when the watermark passes it):
    only the values of ``column`` the table already holds are replaced -- a window the stream has not
    written yet would be written twice; the others are returned (as SQL literals), to rebuild once the
    stream has written them. ``values``: limit the rebuild to these values (such a deferred rest).
    ``on_deferred`` gets those before the commit. Returns the writer (its ``stats``) and the values deferred."""
    from pyspark.sql import functions as F


    quoted = "`" + column.replace("`", "``") + "`"
    deferred: list[str] = []
    transform = True
    if values is not None:
        predicate = f"({predicate}) AND {quoted} IN ({', '.join(values)})" if values else "FALSE"
    if clip or values is not None:
        out = apply_transform(df, spec.transform)
        if "_metadata" in out.columns:
            out = out.drop("_metadata")
        transform = False
        if values is not None:
            out = out.where(F.expr(predicate))
        if clip:
            out = out.persist()
            held = {sql_literal(r[0]) for r in spark.read.format("delta").load(table).where(predicate)
                    .select(column).distinct().collect() if r[0] is not None}
            made = {sql_literal(r[0]) for r in out.select(column).distinct().collect() if r[0] is not None}
            deferred = sorted(made - held)
            if deferred:
                predicate = f"({predicate}) AND {quoted} IN ({', '.join(sorted(held))})" if held else "FALSE"
                out = out.where(F.expr(predicate)) if held else out.limit(0)
        df = out
    if on_deferred is not None:
        on_deferred(deferred)
    meta = {SLICE_KEY: slice_metadata(column, slice_, predicate), **(metadata or {})}
    writer = BatchWriter(spec, Target(table=table, quarantine=quarantine, app_id=None, run_id=run_id,
                                      checkpoint=None, replace_where=predicate, backfill=slice_.label, files=files,
                                      commit_metadata=meta), transform=transform)
    try:
        if predicate != "FALSE":
            writer(df, 0)
    finally:
        if clip:
            df.unpersist()
    return writer, deferred
