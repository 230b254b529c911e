"""The Delta sink: one streaming write per pipeline, with its own checkpoint.

``append`` and ``complete`` use Delta's streaming sink, which commits each micro-batch with the query id
and batch id as an idempotent transaction, so a batch replayed after a crash is skipped:
https://docs.delta.io/latest/delta-streaming.html#idempotent-table-writes-in-foreachbatch

``merge`` upserts each micro-batch with foreachBatch + MERGE, made idempotent the same way: the MERGE is
committed with Delta's transaction options (``txnAppId`` = the pipeline's id, ``txnVersion`` = the batch
id), so Delta skips a batch it has already committed.
"""

from __future__ import annotations

import json

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery

from sluice.spec import PipelineSpec, Sink, Trigger

TXN_APP_ID_CONF = "spark.databricks.delta.write.txnAppId"
TXN_VERSION_CONF = "spark.databricks.delta.write.txnVersion"
USER_METADATA_CONF = "spark.databricks.delta.commitInfo.userMetadata"


def merge_app_id(pipeline: str, checkpoint_id: str) -> str:
    """The transaction id of a merge pipeline's commits. It changes with the checkpoint: a reset
    pipeline restarts its batch ids at 0, which must not look like batches already committed."""
    return f"sluice-{pipeline}-{checkpoint_id}"


def start_write(
    df: DataFrame, spec: PipelineSpec, *, table_path: str, checkpoint: str, trigger: Trigger, query_name: str,
    checkpoint_id: str,
) -> StreamingQuery:
    """Start the one-shot query."""
    writer = df.writeStream.option("checkpointLocation", checkpoint).queryName(query_name)
    if spec.sink.mode == "merge":
        upsert = MergeBatch(spec.sink, table_path, app_id=merge_app_id(spec.name, checkpoint_id))
        # update: a stateful query hands over the rows that changed; a stateless one, every new row
        writer = writer.outputMode("update").foreachBatch(upsert)
    else:
        writer = writer.format("delta").outputMode(spec.sink.mode)
        if spec.sink.partition_by:
            writer = writer.partitionBy(*spec.sink.partition_by)
    # AvailableNow processes everything present at start (in several batches if rate-limited) and runs
    # the no-data batch that lets a watermark emit finished windows; Once runs one batch and no no-data batch.
    writer = writer.trigger(availableNow=True) if trigger == "available_now" else writer.trigger(once=True)
    return writer.start() if spec.sink.mode == "merge" else writer.start(table_path)


class MergeBatch:
    """foreachBatch function: upsert one micro-batch into the table by the sink's keys."""

    def __init__(self, sink: Sink, table_path: str, *, app_id: str):
        self.sink = sink
        self.table_path = table_path
        self.app_id = app_id

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        from delta.tables import DeltaTable

        spark = batch.sparkSession
        rows = latest_per_key(batch, self.sink)
        target = DeltaTable.forPath(spark, self.table_path)
        keys = " AND ".join(f"t.`{k}` <=> s.`{k}`" for k in self.sink.keys)
        order = self.sink.order_by
        # the incoming row wins unless it is older; a table row without an order value is always replaced
        newer = f"(s.`{order}` >= t.`{order}` OR t.`{order}` IS NULL)" if order else None
        columns = _columns(batch)
        merge = target.alias("t").merge(rows.alias("s"), keys)
        if self.sink.delete_when:
            deleted = f"s.`{DELETE_FLAG}`"
            merge = merge.whenMatchedDelete(_all(deleted, newer))
            merge = merge.whenMatchedUpdate(_all(f"NOT {deleted}", newer), set=columns)
            merge = merge.whenNotMatchedInsert(f"NOT {deleted}", values=columns)
        else:
            merge = merge.whenMatchedUpdate(newer, set=columns)
            merge = merge.whenNotMatchedInsert(values=columns)
        conf = spark.conf
        conf.set(TXN_APP_ID_CONF, self.app_id)
        conf.set(TXN_VERSION_CONF, str(batch_id))
        conf.set(USER_METADATA_CONF, json.dumps({"sluice_app_id": self.app_id, "batch_id": batch_id}))
        try:
            merge.execute()
        finally:
            for key in (TXN_APP_ID_CONF, TXN_VERSION_CONF, USER_METADATA_CONF):
                conf.unset(key)


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
