"""The MERGE sink (``sink.mode: merge``): each micro-batch upserted into the table by the sink's ``keys`` as ONE
Delta MERGE, the batch's idempotent transaction (``txnAppId`` / ``txnVersion``, :mod:`spark_jobs.sinks.commit`):
a replay after a crash changes nothing. The latest row of a key in the batch wins (``order_by``, or arrival);
``delete_when`` deletes the key's row instead."""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from sluice.spec import Sink
from sluice.storage.lock import check_held
from spark_jobs.sinks.commit import Commit, in_transaction


def merge_rows(batch: DataFrame, sink: Sink, table_path: str, commit: Commit) -> None:
    """Upsert one micro-batch into the table by the sink's keys, as the idempotent transaction."""
    from delta.tables import DeltaTable

    spark = batch.sparkSession
    rows = latest_per_key(batch, sink)
    target = DeltaTable.forPath(spark, table_path)
    keys = " AND ".join(f"t.`{k}` <=> s.`{k}`" for k in sink.keys)
    order = sink.order_by
    # the incoming row wins unless it is older; a table row without an order value is always replaced
    newer = f"(s.`{order}` >= t.`{order}` OR t.`{order}` IS NULL)" if order else None
    columns = _columns(batch)
    merge = target.alias("t").merge(rows.alias("s"), keys)
    if sink.delete_when:
        deleted = f"s.`{DELETE_FLAG}`"
        merge = merge.whenMatchedDelete(_all(deleted, newer))
        merge = merge.whenMatchedUpdate(_all(f"NOT {deleted}", newer), set=columns)
        merge = merge.whenNotMatchedInsert(f"NOT {deleted}", values=columns)
    else:
        merge = merge.whenMatchedUpdate(newer, set=columns)
        merge = merge.whenNotMatchedInsert(values=columns)
    with in_transaction(spark, commit):
        check_held()
        merge.execute()


DELETE_FLAG = "__sluice_delete"


def latest_per_key(batch: DataFrame, sink: Sink) -> DataFrame:
    """One row per key: MERGE fails when several source rows match one target row. The row with the
    greatest ``order_by`` wins; without ``order_by``, the batch's last row (by arrival) wins."""
    ordering = F.col(sink.order_by).desc_nulls_last() if sink.order_by else F.col("__sluice_seq").desc()
    with_seq = batch.withColumn("__sluice_seq", F.monotonically_increasing_id())
    if sink.delete_when:
        with_seq = with_seq.withColumn(DELETE_FLAG, F.coalesce(F.expr(sink.delete_when), F.lit(False)))
    window = Window.partitionBy(*[F.col(k) for k in sink.keys]).orderBy(ordering, F.col("__sluice_seq").desc())
    return (
        with_seq.withColumn("__sluice_rank", F.row_number().over(window))
        .where("__sluice_rank = 1")
        .drop("__sluice_rank", "__sluice_seq")
    )


def _columns(batch: DataFrame) -> dict[str, str]:
    return {f"`{c}`": f"s.`{c}`" for c in batch.columns}


def _all(*conditions: str | None) -> str:
    return " AND ".join(f"({c})" for c in conditions if c)
