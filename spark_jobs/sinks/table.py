"""The Delta sink: every micro-batch is written by :class:`spark_jobs.batch.writer.BatchWriter` (foreachBatch),
to the sink table and, for bad rows, to the quarantine table -- two writes of one exactly-once batch.

Each write is an idempotent Delta transaction: ``txnAppId`` = the pipeline's id for this checkpoint,
``txnVersion`` = the batch id. Delta skips a write whose transaction it has already committed, so a batch
replayed after a crash (written to the table, not yet marked done in the checkpoint) duplicates nothing:
https://docs.delta.io/latest/delta-streaming.html#idempotent-table-writes-in-foreachbatch

``append`` appends the batch's rows; ``complete`` overwrites the table with a stateful query's whole
result; ``merge`` upserts by the sink's keys (Delta MERGE, :mod:`spark_jobs.sinks.merge`); ``scd2`` keeps
every version of each key (:mod:`spark_jobs.sinks.scd2`, one MERGE per batch too).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Callable

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery

from sluice.spec import PipelineSpec, Sink, Trigger
from sluice.storage.delta_log import DeltaLog
from sluice.storage.lock import check_held
from spark_jobs.sinks.checkpoint_files import clear_interrupted_start
from spark_jobs.sinks.commit import (
    ARBITRARY_PROPERTIES_CONF,
    Commit,
    NewTable,
    session_conf,
)
from spark_jobs.sinks.merge import DELETE_FLAG, latest_per_key, merge_rows
from spark_jobs.sinks.scd2 import scd2_rows


def txn_app_id(pipeline: str, checkpoint_id: str) -> str:
    """The transaction id of a pipeline's commits (``pipeline``: its identity, the first of its names, which a
    rename keeps: a batch committed before the rename and replayed after it is still skipped). It changes
    with the checkpoint: a reset pipeline restarts its batch ids at 0, which must not look like batches
    already committed."""
    return f"sluice-{pipeline}-{checkpoint_id}"


merge_app_id = txn_app_id


def output_mode(spec: PipelineSpec) -> str:
    # update: a stateful query hands over the rows that changed; a stateless one, every new row
    return "update" if spec.sink.mode in ("merge", "scd2") else spec.sink.mode


def start_write(
    df: DataFrame, *, batch_function: Callable[[DataFrame, int], None], checkpoint: str, trigger: Trigger,
    query_name: str, mode: str,
) -> StreamingQuery:
    """Start the one-shot query (after clearing what a killed first batch left half written)."""
    clear_interrupted_start(df.sparkSession, checkpoint)
    writer = df.writeStream.option("checkpointLocation", checkpoint).queryName(query_name)
    writer = writer.outputMode(mode).foreachBatch(batch_function)
    # AvailableNow processes everything present at start (in several batches if rate-limited) and runs
    # the no-data batch that lets a watermark emit finished windows; Once runs one batch and no no-data batch.
    writer = writer.trigger(availableNow=True) if trigger == "available_now" else writer.trigger(once=True)
    return writer.start()


def write_rows(rows: DataFrame, path: str, commit: Commit, *, overwrite: bool = False,
               partition_by: list[str] | None = None, optimize_write: bool | None = None) -> None:
    """Append (or overwrite with) ``rows`` in one commit: the idempotent transaction (app_id, batch_id), or
    a backfill's replaceWhere -- idempotent by what it replaces, not by a transaction id. With
    ``commit.new_table`` and no table at ``path`` yet, the write creates it (:func:`_as_new_table`) in the
    same commit, its table properties given as the write's ``delta.*`` options: Delta takes properties it
    does not know only with ``allowArbitraryProperties``, set around this write alone, so that every other
    write and ALTER keeps Delta's check (a misspelt ``delta.*`` setting stays an error, not a property).
    ``optimize_write``: Delta's ``optimizeWrite`` option (None: the table's property or the session decide)."""
    creating = commit.new_table is not None and not has_commit(path)
    if creating:
        rows = _as_new_table(rows, commit.new_table)
    writer = rows.write.format("delta").mode("overwrite" if overwrite or commit.replace_where else "append")
    if commit.app_id is not None:
        writer = writer.option("txnAppId", commit.app_id).option("txnVersion", str(commit.batch_id))
    if commit.user_metadata():
        writer = writer.option("userMetadata", commit.user_metadata())
    if commit.replace_where:
        writer = writer.option("replaceWhere", commit.replace_where)
    if commit.merge_schema:
        writer = writer.option("mergeSchema", "true")
    if partition_by:
        writer = writer.partitionBy(*partition_by)
    if optimize_write is not None:
        writer = writer.option("optimizeWrite", str(optimize_write).lower())
    confs = {}
    if creating:
        for key, value in commit.new_table.properties.items():
            writer = writer.option(key, value)
        confs[ARBITRARY_PROPERTIES_CONF] = "true"
    check_held()  # on object storage: this run still holds the pipeline's lease (sluice.storage.lock.LeaseLock)
    with session_conf(rows.sparkSession, confs):
        writer.save(path)


def has_commit(path: str) -> bool:
    """Whether the table at ``path`` has a commit (a ``_delta_log`` of temporary files only is no table)."""
    log = DeltaLog.open(path)
    return log is not None and bool(log.versions())


def _as_new_table(rows: DataFrame, table: NewTable) -> DataFrame:
    """The rows of a write that creates the table: the run's output columns first, in their order, as the
    guards created the table before (a batch may lack one, e.g. _rescued where add_columns drops it, and may
    add columns of its own)."""
    declared = [f.name for f in table.schema.fields]
    order = [*declared, *[c for c in rows.columns if c not in declared]]
    if order == rows.columns:
        return rows
    missing = {f.name: f.dataType for f in table.schema.fields if f.name not in rows.columns}
    return rows.select(*[F.lit(None).cast(missing[c]).alias(c) if c in missing else F.col(_quoted(c))
                         for c in order])


def _quoted(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def write_sink(rows: DataFrame, sink: Sink, path: str, commit: Commit) -> None:
    """One batch into the sink table as the sink's mode says (a backfill's: its slice replaced)."""
    if commit.replace_where:
        # a backfill replaces the slice's rows with what its input gives: for a merge sink, the latest row
        # of each key, deletions left out
        if sink.mode == "merge":
            rows = latest_per_key(rows, sink)
            if sink.delete_when:
                rows = rows.where(~F.col(DELETE_FLAG)).drop(DELETE_FLAG)
        write_rows(rows, path, dataclasses.replace(commit, app_id=None), partition_by=sink.partition_by,
                   optimize_write=optimize_write(sink))
    elif sink.mode == "merge":
        merge_rows(rows, sink, path, commit)
    elif sink.mode == "scd2":
        scd2_rows(rows, sink, path, commit)
    else:
        write_rows(rows, path, commit, overwrite=sink.mode == "complete", partition_by=sink.partition_by,
                   optimize_write=optimize_write(sink))


def optimize_write(sink: Sink) -> bool | None:
    """Whether a write of ``sink``'s rows is one of Delta's optimized writes (``sink.optimize_write``): the spec's
    choice, else on for a partitioned table (a batch then writes one file per partition it touches, not one per
    read task and partition); None: as the table's property or the session say."""
    if sink.optimize_write is not None:
        return sink.optimize_write
    return True if sink.partition_by else None


@dataclass
class Target:
    """Where one run writes."""

    table: str
    quarantine: str
    app_id: str | None
    """The idempotent transaction id of the stream's writes; None for a backfill."""
    run_id: str
    checkpoint: str | None
    replace_where: str | None = None
    """A backfill: the slice's predicate; the batch replaces the sink's rows matching it (rows of the
    input outside it are bad records), and the quarantine rows of the same slice (``backfill`` column)."""
    backfill: str | None = None
    """A backfill: the slice's label (``2026-11-01..2026-11-03``), in the quarantine rows' ``backfill``."""
    files: list[str] | None = None
    """A backfill of files: what the batch reads (for the parquet schema check)."""
    evolve_schema: bool = False
    """The run adds or widens columns of the table (checked before the run, :func:`spark_jobs.sinks.guards.check_schema`):
    the sink writes evolve its schema (``mergeSchema``; MERGE with ``autoMerge``) in the batch's commit."""
    widen_types: bool = False
    """The run widens a column: Delta's type widening is turned on before the first write."""
    commit_metadata: dict[str, Any] | None = None
    """A backfill or a rebuild: more of the sink commit's userMetadata (``sluice_slice``, ``sluice_rebuild``:
    what the pipelines downstream read to follow it, :mod:`spark_jobs.corrections.upstream`)."""
    schema_checkpoint: str | None = None
    """A file source without ``source.schema`` and ``add_columns``: the checkpoint whose stored schema gets a
    new version when a batch adds columns (:mod:`sluice.schema.stored`); None otherwise (and in a dry run)."""
    new_table: NewTable | None = None
    """A new pipeline's append or complete sink: no table yet, the first batch's write creates it with the
    pipeline's identity (:func:`spark_jobs.sinks.guards.prepare_sink`); None again once a batch has written."""
