"""A backfill run: rebuild ONE slice of the sink table, without touching the pipeline's checkpoint.

An incremental run ingests whatever is new, whatever its date; a backfill gives a date range a meaning:
the rows of the sink whose ``backfill.column`` falls in the slice [start, end) are replaced (Delta
``replaceWhere``) by what the slice's input gives through the same transform, bad-record handling and
expectations (:class:`spark_jobs.batch.writer.BatchWriter`, one batch).

The slice's input is what the stream has ALREADY ingested for it -- never more:

* files: the files under the slice's folders (``backfill.path``, a template with ``{{ ds }}``) that the
  checkpoint lists in its committed batches;
* Kafka: the records whose timestamp is in the slice, up to the offsets of the checkpoint's last committed
  batch.

What arrived after the last incremental run is left to the next one, so a backfill and the incremental
runs never write a record twice, and running the same backfill twice leaves the table as it was. A
checkpoint with a planned but uncommitted batch (a run that did not finish) is refused: its batch may or
may not be in the table yet. The checkpoint is only read.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from pyspark.sql import DataFrame, SparkSession

from sluice.contract.request import BackfillSlice
from sluice.settings import Settings
from sluice.spec import DeltaSource, FileSource, KafkaSource, PipelineSpec
from sluice.storage.checkpoint import Checkpoint
from sluice.storage.files import Storage
from spark_jobs.batch.transform import query_output
from spark_jobs.corrections.slices import (
    BackfillRefused,
    SliceWrite,
    consumed_through,
    delta_slice,
    slice_predicate,
    write_slice,
)
from spark_jobs.driver.context import Run
from spark_jobs.driver.errors import describe_error
from spark_jobs.sinks import guards

BACKFILL_LABEL_COLUMN = "backfill"
"""Quarantine table: the slice (``2026-11-01..2026-11-03``) whose backfill set the row aside; null for
rows of incremental runs. A backfill replaces its slice's quarantine rows as it replaces the sink's."""


def last_committed_batch(spec: PipelineSpec, checkpoint: str) -> int:
    """The checkpoint's last committed batch; refuses a checkpoint with none, or with a batch planned and
    not committed."""
    cp = Checkpoint(checkpoint)
    commits, planned = cp.done(), cp.planned()
    if not commits:
        raise BackfillRefused(
            f"{spec.name} has ingested nothing yet (its checkpoint {checkpoint} has no committed batch): a "
            "backfill rebuilds a slice from what the stream has ingested. Run it in mode incremental first."
        )
    if planned and planned[-1] > commits[-1]:
        raise BackfillRefused(
            f"the last run of {spec.name} did not finish: batch {planned[-1]} is planned in {checkpoint} but "
            "not committed, so the table may or may not hold it yet. Run it in mode incremental first (it "
            "completes that batch, exactly once), then backfill."
        )
    return commits[-1]


# --- the slice ----------------------------------------------------------------------------------------

def slice_folders(spec: PipelineSpec, settings: Settings, slice_: BackfillSlice) -> list[str]:
    """The folders of the slice's days, from ``backfill.path`` (``{{ ds }}``: 2026-11-01, ``{{ ds_nodash }}``:
    20261101), resolved like ``source.path``."""
    folders = []
    for day in slice_.days():
        relative = spec.backfill.path_for(day)
        folders.append(spec.model_copy(update={"source": spec.source.model_copy(
            update={"path": relative})}).source_path(settings))
    return folders


def slice_files(spec: PipelineSpec, settings: Settings, checkpoint: str, last_batch: int,
                slice_: BackfillSlice) -> tuple[list[str], list[str]]:
    """The committed files under the slice's folders (as the checkpoint names them), and the folders
    that do not exist."""
    folders = slice_folders(spec, settings, slice_)
    missing = [f for f in folders if not Storage(f).is_dir()]
    prefixes = [_local(f).rstrip("/") + "/" for f in folders]
    committed = [entry["path"] for entry in Checkpoint(checkpoint).source_log(through=last_batch)]
    files = [f for f in committed if any(_local(f).startswith(p) for p in prefixes)]
    return sorted(files), missing


def _local(path: str) -> str:
    """A local path from a path or a ``file:`` URI (Spark's log keeps ``=`` unescaped, others may not)."""
    if path.startswith("file:"):
        path = unquote(urlparse(path).path)
    return str(Path(path).resolve()) if "://" not in path else path


def read_slice(run: Run, last_batch: int, info: dict[str, Any]) -> DataFrame:
    """The slice's input (``run.job.backfill``, up to the checkpoint's ``last_batch``) as one batch DataFrame,
    with the same columns (and bad-record marks) as the stream's; ``info`` gets what was read (files, or
    offsets)."""
    from spark_jobs.sources.files import read_source

    spark, spec, settings, checkpoint, slice_ = run.spark, run.spec, run.settings, run.real.checkpoint, run.job.backfill
    if isinstance(spec.source, DeltaSource):
        upstream = spec.source_path(settings)
        version = consumed_through(checkpoint)
        if version is None:
            raise BackfillRefused(
                f"the checkpoint {checkpoint} does not say which version of the upstream table {upstream} its "
                "stream has read through (its last run did not finish its catch-up): run it in mode incremental "
                "first, then backfill."
            )
        predicate = slice_predicate(spark, upstream, spec.backfill.column, slice_, what="the upstream table")
        df, info["upstream"] = delta_slice(spark, upstream, version, predicate)
        return df
    if isinstance(spec.source, KafkaSource):
        from spark_jobs.sources.kafka import read_kafka_slice

        ending = Checkpoint(checkpoint).source_offset(last_batch)  # Kafka's {topic: {partition: offset}}
        info["kafka"] = {"from_timestamp": slice_.start.isoformat(), "to_timestamp": slice_.end.isoformat(),
                         "ending_offsets": ending}
        return read_kafka_slice(spark, spec.source, start=slice_.start, end=slice_.end, ending_offsets=ending,
                                rescue=spec.rescues_fields())
    files, missing = slice_files(spec, settings, checkpoint, last_batch, slice_)
    if missing and spec.source.clean_source is not None:
        from spark_jobs.sources.archive import archived_folder

        missing = [folder for folder in missing if not archived_folder(spec, settings, folder)]
    if missing:
        raise BackfillRefused(
            f"backfill.path: no folder {', '.join(missing)} for the slice {slice_.label}: nothing to rebuild "
            "it from, and the table was not changed. Check backfill.path (relative to the lake root, "
            "{{ ds }} = YYYY-MM-DD); for a day without data, create its folder empty"
        )
    info["files"] = len(files)
    info["folders"] = slice_folders(spec, settings, slice_)
    if spec.source.clean_source is not None:  # files archived since they were ingested: read from the archive
        from spark_jobs.sources.archive import locate_for_backfill

        files = locate_for_backfill(spec, settings, files)
    return read_source(spark, spec, settings, files=files)


# --- the run --------------------------------------------------------------------------------------------

def run_backfill(run: Run) -> None:
    """Rebuild the slice ``run.job.backfill`` of the sink; fill ``run.summary``. Refusals raise
    :class:`BackfillRefused`; other failures become ``summary.error``. A dry run replaces the slice in
    a shallow clone of the table, in ``scratch``."""
    from spark_jobs.corrections.upstream import aggregates
    from spark_jobs.sinks.delta_table import current_version

    spark, spec, settings, summary = run.spark, run.spec, run.settings, run.summary
    table, checkpoint = run.real.table, run.real.checkpoint
    slice_ = run.job.backfill
    info: dict[str, Any] = {"column": spec.backfill.column, "slice": slice_.label, "from": slice_.start.isoformat(),
                            "to": slice_.end.isoformat()}
    summary.backfill = info
    phases, mark = summary.phases_s, time.monotonic()
    state = guards.table_state(spark, table)
    if state is None:
        raise BackfillRefused(
            f"{spec.name} has no table yet ({table}): a backfill rebuilds a slice of what the stream ingested. "
            "Run it in mode incremental first."
        )
    guards.refuse_foreign_table(spec, table, state)
    last = last_committed_batch(spec, checkpoint)
    info["checkpoint_batch"] = last
    predicate = slice_predicate(spark, table, spec.backfill.column, slice_)
    info["predicate"] = predicate
    target_table = run.target.table  # a dry run's scratch copy
    if run.dry_run:
        spark.sql(f"CREATE TABLE delta.`{target_table}` SHALLOW CLONE delta.`{table}`")
    writer = None
    try:
        files: list[str] = []
        from spark_jobs.batch.transform import register_tables

        df = read_slice(run, last, info)
        register_tables(spark, spec.transform, settings)
        refuse_schema_change(spark, spec, table, df)
        if isinstance(spec.source, FileSource):
            files, _ = slice_files(spec, settings, checkpoint, last, slice_)
        phases["prepare"], mark = round(time.monotonic() - mark, 3), time.monotonic()
        clip = isinstance(spec.source, DeltaSource) and aggregates(spec)
        writer, deferred = write_slice(run, df, SliceWrite(slice_, spec.backfill.column, predicate, files=files,
                                                           clip=clip))
        if deferred:
            # windows the stream has not written yet: it writes them when the watermark passes them
            info["not_written_yet"] = deferred
        phases["query"] = round(time.monotonic() - mark, 3)
    except guards.GuardRefused:  # BackfillRefused, or an output the table cannot take
        raise
    except Exception as err:  # noqa: BLE001 - every failure becomes the summary's error
        failure = writer.failure if writer is not None else None
        summary.error = describe_error(failure or err)
    summary.delta_version_after = current_version(spark, table)
    stats = writer.stats.get(0, {}) if writer is not None else {}
    summary.input_rows = stats.get("input_rows", 0)
    summary.update(**{key: int(stats.get(key) or 0)
                      for key in ("bad_records", "quarantined_rows", "dropped_rows", "rescued_rows")})
    summary.expectations = stats.get("expectations", {})
    info["outside_slice"] = stats.get("outside_slice", 0)
    if summary.error is None and stats:
        metrics = last_commit_metrics(spark, target_table)
        info["metrics"] = metrics
        summary.output_rows = int(metrics.get("numOutputRows", 0)) - int(metrics.get("numCopiedRows", 0))


def last_commit_metrics(spark: SparkSession, table: str) -> dict[str, str]:
    from delta.tables import DeltaTable

    row = DeltaTable.forPath(spark, table).history(1).select("operationMetrics").first()
    return dict(row["operationMetrics"] or {})


def refuse_schema_change(spark: SparkSession, spec: PipelineSpec, table: str, df: DataFrame) -> None:
    """A backfill replaces a slice; the table's schema is the incremental runs' to change (they move rescued
    values into new columns for every row, which a slice cannot): refuse a spec that changes it."""
    _, _, schema = query_output(spark, spec, df)
    change = guards.check_schema(spark, spec, table=table, schema=schema)
    if change:
        raise BackfillRefused(
            f"the spec of {spec.name} changes its table's schema ({change.describe()}): run it in mode incremental "
            "first (it makes the change, new data or not, and moves rescued values into new columns), then "
            "backfill."
        )
