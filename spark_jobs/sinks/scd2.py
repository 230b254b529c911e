"""The SCD type 2 sink (``sink.mode: scd2``): every version of each key, with ``__start_at`` / ``__end_at``.

One micro-batch is ONE Delta MERGE, the batch's idempotent transaction (``txnAppId`` / ``txnVersion``, as the
merge sink's): a replayed batch changes nothing, and a kill leaves the batch either wholly applied or not at
all. For the keys the batch touches:

1. the table's versions of those keys are turned back into the changes they stand for: a version is a change
   at its ``__start_at`` (and, when untracked columns were updated in place later, one at its ``sequence_by``
   value too); a version whose ``__end_at`` no other version starts at was ended by a deletion there;
2. with the batch's changes added, each key's history is computed anew, ordered by ``sequence_by`` whatever
   batch a change came in (a late change lands in its place; one key and sequence value: one change, the
   last to arrive -- a later batch's over the table's, within a batch its last row);
3. the difference is the MERGE on (keys, ``__start_at``): new versions inserted, changed ones updated,
   versions that no longer exist (a late change made them part of an earlier version) deleted.

Rows without a ``sequence_by`` value are bad records (:class:`spark_jobs.batch.writer.BatchWriter`).
"""

from __future__ import annotations

from functools import reduce

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql.types import StructField, StructType

from sluice.spec import SCD2_END, SCD2_START, Sink
from sluice.storage.lock import check_held
from spark_jobs.sinks.commit import Commit, in_transaction

DELETED = "__sluice_deleted"
_ORIGIN = "__sluice_origin"  # 0: the table's versions, 1: the batch's changes (a later arrival wins a tie)
_ARRIVAL = "__sluice_arrival"
_STARTS = "__sluice_starts"
_DROP = "__sluice_drop"


class Scd2ColumnError(ValueError):
    """A column the scd2 sink names is not a column of the rows it gets."""


def history_schema(sink: Sink, output: StructType) -> StructType:
    """The table's schema: the rows' columns, then ``__start_at`` and ``__end_at`` of ``sequence_by``'s type."""
    names = {f.name: f for f in output.fields}
    check_columns(sink, list(names))
    sequence_type = names[sink.sequence_by].dataType
    return StructType([*output.fields, StructField(SCD2_START, sequence_type, True),
                       StructField(SCD2_END, sequence_type, True)])


def check_columns(sink: Sink, columns: list[str]) -> None:
    named = {"keys": sink.keys, "sequence_by": [sink.sequence_by], "track_history_columns": sink.track_history_columns,
             "except_columns": sink.except_columns}
    for field, wanted in named.items():
        missing = [c for c in wanted if c not in columns]
        if missing:
            raise Scd2ColumnError(
                f"sink.{field}: {', '.join(missing)} is not a column of the rows the sink gets (columns: "
                f"{', '.join(columns)}); name one of those (after transform.sql)")
    clash = [c for c in (SCD2_START, SCD2_END) if c in columns]
    if clash:
        raise Scd2ColumnError(f"sink.mode: scd2 adds the column(s) {', '.join(clash)}, which the rows already "
                              "have; rename them in transform.sql")


def tracked_columns(sink: Sink, columns: list[str]) -> list[str]:
    """The columns whose change starts a new version."""
    if sink.track_history_columns:
        return list(sink.track_history_columns)
    untracked = {*sink.keys, sink.sequence_by, *sink.except_columns}
    return [c for c in columns if c not in untracked]


def scd2_rows(batch: DataFrame, sink: Sink, table_path: str, commit: Commit) -> None:
    """Apply one micro-batch of changes to the history table, as the idempotent transaction ``commit``."""
    from delta.tables import DeltaTable

    columns = list(batch.columns)
    check_columns(sink, columns)
    changes = batch.select(
        *columns,
        (F.coalesce(F.expr(sink.delete_when), F.lit(False)) if sink.delete_when else F.lit(False)).alias(DELETED),
        F.lit(1).alias(_ORIGIN),
        F.monotonically_increasing_id().alias(_ARRIVAL),
    )
    spark = batch.sparkSession
    table = spark.read.format("delta").load(table_path)
    touched = changes.select(*sink.keys).distinct()
    # read once: the MERGE's source reads it twice (history, and the versions to delete)
    existing = table.join(_renamed(touched, sink.keys), _same_keys(table, sink.keys), "left_semi").select(
        *columns, SCD2_START, SCD2_END).localCheckpoint()
    events = changes.unionByName(table_changes(existing, sink, columns))
    # computed once (the batch's arrival order is not reproducible by a second read)
    history = compute_history(events, sink, columns).localCheckpoint()
    kept = [*sink.keys, SCD2_START]
    gone = existing.join(_renamed(history, kept), _same_keys(existing, kept), "left_anti")
    source = history.withColumn(_DROP, F.lit(False)).unionByName(
        gone.select(*columns, SCD2_START, SCD2_END, F.lit(True).alias(_DROP)))
    on = " AND ".join([*(f"t.`{k}` <=> s.`{k}`" for k in sink.keys), f"t.`{SCD2_START}` = s.`{SCD2_START}`"])
    written = [*columns, SCD2_START, SCD2_END]
    values = {f"`{c}`": f"s.`{c}`" for c in written}
    unchanged = " AND ".join(f"t.`{c}` <=> s.`{c}`" for c in written)
    merge = (
        DeltaTable.forPath(spark, table_path).alias("t").merge(source.alias("s"), on)
        .whenMatchedDelete(f"s.`{_DROP}`")
        .whenMatchedUpdate(f"NOT s.`{_DROP}` AND NOT ({unchanged})", set=values)
        .whenNotMatchedInsert(f"NOT s.`{_DROP}`", values=values)
    )
    with in_transaction(spark, commit):
        check_held()
        merge.execute()


def table_changes(existing: DataFrame, sink: Sink, columns: list[str]) -> DataFrame:
    """The changes the table's versions stand for: each version is a change at its ``__start_at`` (the
    ``sequence_by`` column set to it) and, if its row was updated in place by a later change of untracked
    columns, that change (at the row's ``sequence_by``); a version ended where the key's next version does
    not start (or with no next version) was ended by a deletion."""
    seq = sink.sequence_by
    start = existing.select(*[(F.col(SCD2_START) if c == seq else F.col(c)).alias(c) for c in columns],
                            F.lit(False).alias(DELETED))
    later = existing.where(F.col(seq) > F.col(SCD2_START)).select(*columns, F.lit(False).alias(DELETED))
    following = F.lead(F.col(SCD2_START)).over(Window.partitionBy(*sink.keys).orderBy(SCD2_START))
    types = dict(existing.dtypes)
    deletions = existing.withColumn("__next", following).where(
        F.col(SCD2_END).isNotNull() & ~F.coalesce(F.col("__next") == F.col(SCD2_END), F.lit(False))
    ).select(
        # a deletion's data columns are NULL, of the columns' types
        *[(F.col(c) if c in sink.keys else F.col(SCD2_END) if c == seq else F.lit(None).cast(types[c])).alias(c)
          for c in columns],
        F.lit(True).alias(DELETED))
    return start.unionByName(later).unionByName(deletions).select(
        "*", F.lit(0).alias(_ORIGIN), F.lit(0).cast("bigint").alias(_ARRIVAL))


def compute_history(events: DataFrame, sink: Sink, columns: list[str]) -> DataFrame:
    """Each key's versions from its changes (``DELETED`` marks deletions), as table rows.

    Every step is a window over the key ordered by ``sequence_by`` (one shuffle, one sort): the windows'
    order puts, within one sequence value, the last change to arrive first."""
    seq = F.col(sink.sequence_by)
    key = Window.partitionBy(*sink.keys).orderBy(seq, F.col(_ORIGIN).desc(), F.col(_ARRIVAL).desc())
    # one change per key and sequence value: the last to arrive (a later batch's over the table's)
    events = events.withColumn("__dup", F.coalesce(F.lag(seq).over(key) == seq, F.lit(False)))
    events = events.where(~F.col("__dup")).drop("__dup")
    upsert, previous_deleted = ~F.col(DELETED), F.lag(F.col(DELETED)).over(key)
    same = reduce(lambda a, b: a & b,
                  [F.col(c).eqNullSafe(F.lag(F.col(c)).over(key)) for c in tracked_columns(sink, columns)],
                  F.lit(True))
    # a change starts a version unless it follows a change of the same tracked values; a deletion counts
    # only when it ends a version (one of a key with no current version changes nothing)
    events = events.select(
        "*",
        (upsert & (previous_deleted.isNull() | previous_deleted | ~same)).alias(_STARTS),
        (F.col(DELETED) & previous_deleted.isNotNull() & ~previous_deleted).alias("__ends"),
    ).where(upsert | F.col("__ends"))
    boundary = F.col(_STARTS) | F.col("__ends")
    # a version: the start of its first change, the values of its last (untracked columns updated in place)
    events = events.select(
        "*",
        F.max(F.when(F.col(_STARTS), seq)).over(key.rowsBetween(Window.unboundedPreceding, 0)).alias(SCD2_START),
        F.min(F.when(boundary, seq)).over(key.rowsBetween(1, Window.unboundedFollowing)).alias(SCD2_END),
        F.coalesce(F.lead(boundary).over(key), F.lit(True)).alias("__last"),
    )
    return events.where(upsert & F.col("__last")).select(*columns, SCD2_START, SCD2_END)


def _renamed(df: DataFrame, names: list[str]) -> DataFrame:
    """``names`` of ``df`` as ``__other_<name>`` (a join with a frame of the same lineage stays unambiguous)."""
    return df.select(*[F.col(n).alias(f"__other_{n}") for n in names])


def _same_keys(left: DataFrame, names: list[str]) -> Column:
    return reduce(lambda a, b: a & b, [left[n].eqNullSafe(F.col(f"__other_{n}")) for n in names])
