"""The spec's ``sink:`` (append, complete, MERGE, SCD2) and ``maintenance:`` of its tables."""

from __future__ import annotations

from typing import Annotated

from pydantic import (
    Field,
    field_validator,
    model_validator,
)

from sluice.spec.common import SCD2_END, SCD2_START, SinkMode, _Model, table_name


class Sink(_Model):
    """The Delta table the pipeline writes."""

    path: str | None = None
    """Table folder: relative to the lake root, or absolute. Default: ``<lake root>/<name>``."""
    table: str | None = None
    """The table's name in the catalog, ``schema.table`` (e.g. ``bronze.orders``): registered for the folder
    (``path`` stays the truth, never a copy) after the run's first commit, so ``spark.table("bronze.orders")``
    and ``SELECT ... FROM bronze.orders`` read it. Default: none, or with ``SLUICE_TABLE_NAMES=auto`` a name made
    from the folder. See docs/catalog.md."""
    mode: SinkMode = "append"
    """``append`` adds each micro-batch's rows; ``complete`` rewrites the table with a stateful query's result;
    ``merge`` upserts each micro-batch into the table by ``keys`` (Delta MERGE); ``scd2`` keeps every
    version of each key (SCD type 2: ``__start_at`` / ``__end_at`` columns, see docs/scd2.md)."""
    partition_by: list[str] = Field(default_factory=list)
    """Partition columns of the table."""
    optimize_write: bool | None = None
    """Delta's optimized writes: a batch's rows are shuffled by the partition columns before they are written, so
    a batch writes one file per partition it touches (up to Delta's bin size, 512 MiB) instead of one per read
    task and partition -- fewer small files for readers, OPTIMIZE and every later snapshot of the table, for
    one more shuffle per batch. Default: on for a table with ``partition_by`` (its appends, a complete sink's
    rewrites, backfills), else as the table's ``delta.autoOptimize.optimizeWrite`` property or the session's
    ``spark.databricks.delta.optimizeWrite.enabled`` say (off by default). Not for ``merge`` and ``scd2``
    sinks: Delta's MERGE repartitions by the partition columns before it writes."""
    keys: list[str] = Field(default_factory=list)
    """``merge``: the columns that identify a row (one row per key in the table). ``scd2``: the columns that
    identify an entity (one row per version of it, at most one current row)."""
    order_by: str | None = None
    """``merge``: a column whose greatest value wins, among a batch's rows of one key and against the table's
    row (an older change never overwrites a newer one). Without it, the batch's last row of a key wins."""
    delete_when: str | None = None
    """``merge``, ``scd2``: a Spark SQL predicate over the incoming row that marks it a deletion (CDC feeds),
    e.g. ``op = 'D'``: the key's row is deleted (``scd2``: its current version is ended at the deletion's
    ``sequence_by``); such a row is never inserted."""
    sequence_by: str | None = None
    """``scd2``: the column that orders a key's changes (a version number or change timestamp; required).
    Each version's ``__start_at`` / ``__end_at`` have its type. A change that arrives late is put in its
    place in the key's history, never applied over a newer one; a row whose value is NULL is a bad record."""
    track_history_columns: list[str] = Field(default_factory=list)
    """``scd2``: only a change of these columns starts a new version; a change of other columns updates the
    version it falls in, in place. Default: all columns but the keys and ``sequence_by``."""
    except_columns: list[str] = Field(default_factory=list)
    """``scd2``: the columns whose change does NOT start a new version (all others do, but the keys and
    ``sequence_by``); the other way to say ``track_history_columns``, not with it."""

    @field_validator("table")
    @classmethod
    def _table_name(cls, value: str | None) -> str | None:
        return None if value is None else table_name(value)

    @model_validator(mode="after")
    def _merge_fields(self) -> Sink:
        if self.mode in ("merge", "scd2"):
            if not self.keys:
                raise ValueError(f"keys: required with mode: {self.mode}; name the key columns, e.g. keys: [order_id]")
            if len(set(self.keys)) != len(self.keys):
                raise ValueError(f"keys: {self.keys} names a column twice")
        if self.mode in ("merge", "scd2") and self.optimize_write is not None:
            raise ValueError(f"optimize_write: used by append and complete sinks; a {self.mode} sink's MERGE already "
                             "writes by partition (Delta repartitions before it writes): remove it")
        if self.mode == "merge":
            if self.order_by in self.keys:
                raise ValueError(f"order_by: {self.order_by!r} is a key column; name the version/timestamp column")
        elif self.mode != "scd2":
            extra = [f for f in ("keys", "order_by", "delete_when") if getattr(self, f)]
            if extra:
                raise ValueError(
                    f"{extra[0]}: only used with mode: merge (the sink's mode is {self.mode}); "
                    "remove it or set mode: merge (or scd2)"
                )
        if self.mode == "scd2":
            self._scd2_fields()
        else:
            extra = [f for f in ("sequence_by", "track_history_columns", "except_columns") if getattr(self, f)]
            if extra:
                raise ValueError(
                    f"{extra[0]}: only used with mode: scd2 (the sink's mode is {self.mode}); "
                    "remove it or set mode: scd2"
                )
        return self

    def _scd2_fields(self) -> None:
        if self.order_by:
            raise ValueError("order_by: a merge sink's field; with mode: scd2 name the column that orders a key's "
                             f"changes in sequence_by (e.g. sequence_by: {self.order_by})")
        if not self.sequence_by:
            raise ValueError("sequence_by: required with mode: scd2; name the column that orders a key's changes "
                             "(a version number or change timestamp), e.g. sequence_by: updated_at")
        if self.sequence_by in self.keys:
            raise ValueError(f"sequence_by: {self.sequence_by!r} is a key column; name the version/timestamp column")
        if self.track_history_columns and self.except_columns:
            raise ValueError("track_history_columns: set either track_history_columns (the columns that start a "
                             "new version) or except_columns (the columns that do not), not both")
        for field in ("track_history_columns", "except_columns"):
            columns = getattr(self, field)
            keys = [c for c in columns if c in self.keys]
            if keys:
                raise ValueError(f"{field}: {', '.join(keys)} is a key column; a key's versions all have the "
                                 "same key, remove it")
            if len(set(columns)) != len(columns):
                raise ValueError(f"{field}: {columns} names a column twice")
        if SCD2_START in self.keys or SCD2_END in self.keys or self.sequence_by in (SCD2_START, SCD2_END):
            raise ValueError(f"keys: {SCD2_START} and {SCD2_END} are the columns the scd2 sink adds; rename the "
                             "column in transform.sql")


DELTA_SAFE_RETENTION_HOURS = 168
"""Delta's own safety default for VACUUM (``delta.deletedFileRetentionDuration``, 7 days)."""


class Maintenance(_Model):
    """What the maintenance DAG (``sluice_maintenance``) does to the pipeline's tables, and how much of its
    checkpoint's history the runs keep."""

    enabled: bool = True
    """false: the maintenance DAG leaves this pipeline alone."""
    optimize: bool = True
    """Compact the sink's (and quarantine table's) small files: Delta OPTIMIZE; one-shot runs write a few
    small files each."""
    zorder_by: list[str] = Field(default_factory=list)
    """OPTIMIZE ... ZORDER BY these columns (not the partition columns)."""
    vacuum: bool = True
    """Delete files the table no longer references once they are older than ``vacuum_retention_hours``."""
    vacuum_retention_hours: Annotated[int, Field(ge=0)] = DELTA_SAFE_RETENTION_HOURS
    """Never below Delta's safety default (168 h = 7 days) unless ``force_retention: true``: a reader, a dry
    run's clone or a time-travel query may still use the older files."""
    force_retention: bool = False
    """``true`` allows a ``vacuum_retention_hours`` below 168."""
    checkpoint_batches_to_retain: Annotated[int, Field(ge=2)] = 100
    """The checkpoint keeps the offsets and commits of this many batches (Spark's
    ``spark.sql.streaming.minBatchesToRetain``) and drops older ones, so a checkpoint does not grow over
    thousands of runs."""

    @model_validator(mode="after")
    def _safe_retention(self) -> Maintenance:
        if self.vacuum_retention_hours < DELTA_SAFE_RETENTION_HOURS and not self.force_retention:
            raise ValueError(
                f"vacuum_retention_hours: {self.vacuum_retention_hours} is below Delta's safety default of "
                f"{DELTA_SAFE_RETENTION_HOURS} h (7 days): a reader, a dry run's clone or a time-travel query "
                "still using older files would fail. Use at least 168, or add force_retention: true if you "
                "accept that"
            )
        return self
