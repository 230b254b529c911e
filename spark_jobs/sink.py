"""The Delta sink: one streaming write per pipeline, with its own checkpoint."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql.streaming import StreamingQuery

from sluice.spec import PipelineSpec, Trigger


def start_write(
    df: DataFrame, spec: PipelineSpec, *, table_path: str, checkpoint: str, trigger: Trigger, query_name: str
) -> StreamingQuery:
    """Start the one-shot query. Delta's streaming sink commits each micro-batch with the query id and
    batch id as an idempotent transaction, so a batch replayed after a crash is skipped:
    https://docs.delta.io/latest/delta-streaming.html#idempotent-table-writes-in-foreachbatch
    """
    writer = (
        df.writeStream.format("delta")
        .outputMode(spec.sink.mode)
        .option("checkpointLocation", checkpoint)
        .queryName(query_name)
    )
    if spec.sink.partition_by:
        writer = writer.partitionBy(*spec.sink.partition_by)
    # AvailableNow processes everything present at start (in several batches if rate-limited) and runs
    # the no-data batch that lets a watermark emit finished windows; Once runs one batch and no no-data batch.
    writer = writer.trigger(availableNow=True) if trigger == "available_now" else writer.trigger(once=True)
    return writer.start(table_path)
