"""Sources: turn a spec's ``source:`` into a streaming DataFrame (files here, Kafka in kafka_source)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from sluice.settings import Settings
from sluice.spark_conf import option_text
from sluice.spec import DeltaSource, FileSource, KafkaSource, PipelineSpec
from sluice.spec.common import duration_seconds
from sluice.storage.checkpoint import source_folder
from sluice.storage.delta_log import DeltaLog
from spark_jobs.driver.errors import BatchRejected, describe_error
from spark_jobs.quality.records import (
    CORRUPT,
    METADATA,
    ORIGIN,
    json_columns,
    with_bad_columns,
)
from spark_jobs.sources.kafka import read_kafka_stream

KEEP_EVERY_FILE = "36500d"
INDEXED_SOURCE = "dev.sluice.files.IndexedFileSourceProvider"
"""``source.discovery: index``: Spark's file source with sluice's discovery (jvm/files, var/jars/sluice)."""
INDEXED_PARQUET_SOURCE = "dev.sluice.files.IndexedParquetSourceProvider"
FILE_PATH_FUNCTION = "sluice_file_path"
"""The file a row was read from, as ``_metadata.file_path`` gives it, computed for the rows that ask for it
(jvm/files ``FilePathExpression``)."""


class SourceError(RuntimeError):
    """The source cannot be read as the spec says; the message says what to fix."""


def read_stream(spark: SparkSession, spec: PipelineSpec, settings: Settings, *,
                skip_change_commits: bool = False) -> DataFrame:
    """The source as a streaming DataFrame: for json and csv, with the internal columns of
    :mod:`spark_jobs.quality.records` that mark bad records. ``skip_change_commits``: a Delta source skips this
    run's commits that changed rows (see :mod:`spark_jobs.corrections.upstream`)."""
    return read_source(spark, spec, settings, skip_change_commits=skip_change_commits)


def read_source(spark: SparkSession, spec: PipelineSpec, settings: Settings, *, files: list[str] | None = None,
                skip_change_commits: bool = False) -> DataFrame:
    """The stream, or with ``files`` (a backfill) one batch of those files, read and parsed the same way."""
    source = spec.source
    if isinstance(source, KafkaSource):
        return read_kafka_stream(spark, source, rescue=spec.rescues_fields())
    if isinstance(source, DeltaSource):
        return read_delta_stream(spark, spec, settings, skip_change_commits=skip_change_commits)
    path = spec.source_path(settings)
    if files is None and "://" not in path and not Path(path).is_dir():
        raise SourceError(
            f"source.path: {path} is not a folder. Create it (files land there) or fix source.path in the "
            f"spec; relative paths start at the lake root {settings.lake_root} (env SLUICE_LAKE_ROOT)."
        )
    options = {key: option_text(value) for key, value in source.options.items()}
    json_lines = source.format == "json" and spec.rescues_fields()
    # JSON lines are read as text and parsed by records.json_columns: the raw line of a bad record is kept,
    # and so are the fields the schema does not declare
    read_as = "text" if json_lines else source.format
    if files is None and source.discovery == "index":
        reader = spark.readStream.format(INDEXED_PARQUET_SOURCE if read_as == "parquet" else INDEXED_SOURCE)
        reader = reader.option("sluice.format", read_as).option("sluice.listing", listing_option(source))
    else:
        reader = (spark.readStream if files is None else spark.read).format(read_as)
    # Spark ignores, after the first batch, files whose modification time is more than maxFileAge (default
    # 7 days) older than the newest file seen: a re-delivered old export (cp -p, rsync -a) would be skipped
    # without a word. Keep every file; a spec can still set maxFileAge in options.
    # https://spark.apache.org/docs/latest/structured-streaming-programming-guide.html#input-sources
    reader = reader.option("maxFileAge", KEEP_EVERY_FILE)
    if source.format == "csv":
        # a quoted value may hold a line break; a row that does not fit the schema keeps its text
        reader = reader.option("multiLine", "true").option("mode", "PERMISSIVE")
        reader = reader.option("columnNameOfCorruptRecord", CORRUPT)
        reader = reader.schema(f"{source.schema_}, `{CORRUPT}` STRING")
    elif source.format == "json" and not json_lines:  # multiLine JSON: Spark's reader, whole files
        reader = reader.option("mode", "PERMISSIVE").option("columnNameOfCorruptRecord", CORRUPT)
        reader = reader.schema(f"{source.schema_}, `{CORRUPT}` STRING")
    elif source.schema_ and not json_lines:
        reader = reader.schema(source.schema_)
    for key, value in options.items():
        reader = reader.option(key, value)
    if source.max_files_per_trigger and files is None:
        reader = reader.option("maxFilesPerTrigger", str(source.max_files_per_trigger))
    if files is None:
        df = reader.load(path)
    elif files:
        df = reader.load(files)
    else:  # a slice with no file: no rows, the columns of a read
        df = reader.schema(_schema_of(spark, reader, json_lines, source)).load(path).limit(0)
    keep_metadata = bool(spec.transform and spec.transform.sql and "_metadata" in spec.transform.sql)
    extra = [F.col("_metadata").alias(METADATA)] if keep_metadata else []
    if not spec.parses_records():
        return df.select("*", *extra)
    origin, computed = file_path(spark)
    if json_lines:
        df = df.where(F.trim(F.col("value")) != "")  # blank lines are no records
        # the scan's metadata column is carried through the parse; the computed path is read above it
        carried = [] if computed else [origin.alias(ORIGIN)]
        df, columns, error = json_columns(df, F.col("value"), source.schema_, options, rescue=True,
                                          keep=[F.col("value"), *carried, *extra])
        return with_bad_columns(df, columns, error, F.col("value"), origin if computed else F.col(ORIGIN),
                                [F.col(METADATA)] if extra else [])
    names = [c for c in df.columns if c != CORRUPT]
    what = "row" if source.format == "csv" else "file"
    error = F.when(
        F.col(CORRUPT).isNotNull(),
        F.lit(f"the {what} does not fit the schema ({source.schema_}): a value of the wrong type, or "
              + ("the wrong number of columns" if source.format == "csv" else "not valid JSON")),
    )
    return with_bad_columns(df, [F.col(n) for n in names], error, F.col(CORRUPT), origin, extra)


def file_path(spark: SparkSession) -> tuple[Column, bool]:
    """The path of the file a row was read from (a bad record's origin), as ``_metadata.file_path`` gives it,
    and whether it is computed: :data:`FILE_PATH_FUNCTION`, evaluated only for the rows that read it (the bad
    ones), in the projection right above the scan. Without the project's jar, the scan's metadata column, which
    makes the scan copy every row into one that holds it (~2% of a clean run's CPU, docs/performance.md)."""
    try:
        spark._jvm.dev.sluice.files.FilePathExpression.register(spark._jsparkSession, FILE_PATH_FUNCTION)
    except Exception:  # noqa: BLE001 - the class is missing (py4j finds a package, not a class)
        return F.col("_metadata.file_path"), False
    return F.call_function(FILE_PATH_FUNCTION), True


def discovery_report(spark: SparkSession, spec: PipelineSpec, checkpoint: str) -> dict | None:
    """What ``source.discovery: index`` did in this run's query (see IndexedFileSource.report); None for
    other sources, or a query that did not start its source."""
    source = spec.source
    if not isinstance(source, FileSource) or source.discovery != "index":
        return None
    text = spark._jvm.dev.sluice.files.IndexedFileSource.report(source_folder(checkpoint))
    return json.loads(text) if text else None


def listing_option(source: FileSource) -> str:
    """The discovery's ``sluice.listing`` option (jvm/files ``Listing``): ``full``, or ``incremental,<look back
    ms>,<full listing every ms>``."""
    if source.listing != "incremental":
        return "full"
    return f"incremental,{duration_seconds(source.look_back) * 1000},{duration_seconds(source.full_listing_every) * 1000}"


def indexed(spec: PipelineSpec) -> bool:
    """Whether the pipeline's files are found by sluice's discovery (``source.discovery: index``)."""
    return isinstance(spec.source, FileSource) and spec.source.discovery == "index"


def source_backlog(found: dict | None) -> dict | None:
    """What a listing of ``source.discovery: index`` found new, as :mod:`sluice.operations.backlog` says a
    backlog (``files``, ``bytes``, ``oldest_at``, ``measured_in_s``); None for no listing."""
    if not found:
        return None
    oldest = found.get("oldest_ms")
    return {"source": "files", "files": found["files"], "bytes": found["bytes"],
            "oldest_at": datetime.fromtimestamp(oldest / 1000, UTC).isoformat(timespec="seconds") if oldest else None,
            "measured_in_s": round(found.get("listing_ms", 0) / 1000, 3)}


def backlog_after(spark: SparkSession, checkpoint: str) -> dict | None:
    """The backlog a run of ``source.discovery: index`` leaves: one more listing by its source, against the
    index it holds (not the log's text read again in Python); None when this JVM made no source of the
    checkpoint. The JVM forgets the source."""
    try:
        text = spark._jvm.dev.sluice.files.IndexedFileSource.backlogAfter(source_folder(checkpoint))
    except Exception as err:  # noqa: BLE001 - a backlog is a report: the folder could not be listed
        return {"source": "files", "error": describe_error(err)}
    return source_backlog(json.loads(text)) if text else None


def forget_source(spark: SparkSession, checkpoint: str) -> None:
    """Drops the source the JVM kept for :func:`backlog_after` when the run did not ask (a dry run, a failure)."""
    spark._jvm.dev.sluice.files.IndexedFileSource.forget(source_folder(checkpoint))


def read_delta_stream(spark: SparkSession, spec: PipelineSpec, settings: Settings, *,
                      skip_change_commits: bool = False) -> DataFrame:
    """An upstream Delta table as a stream: each run reads the commits since the last one.
    https://docs.delta.io/latest/delta-streaming.html#delta-table-as-a-source"""
    source = spec.source
    path = spec.source_path(settings)
    if DeltaLog.open(path) is None:
        upstream = f"pipeline {source.pipeline}" if source.pipeline else "the pipeline that writes it"
        raise SourceError(
            f"source: the Delta table {path} does not exist yet: run {upstream} first (this pipeline reads "
            "its table), or fix source." + ("pipeline" if source.pipeline else "path")
        )
    reader = spark.readStream.format("delta")
    if source.skip_change_commits or skip_change_commits:
        reader = reader.option("skipChangeCommits", "true")
    if source.max_files_per_trigger:
        reader = reader.option("maxFilesPerTrigger", str(source.max_files_per_trigger))
    for key, value in source.options.items():
        reader = reader.option(key, option_text(value))
    return reader.load(path)


def explain_delta_failure(spec: PipelineSpec, error: str) -> str:
    """Delta's streaming source refuses a commit that changed existing rows upstream: say what to do."""
    if "DELTA_SOURCE_TABLE_IGNORE_CHANGES" in error or "Detected a data update" in error:
        return (
            f"{error} -- the upstream table changed or deleted rows (a MERGE, a backfill, a DELETE) while this "
            "run read it: the next run follows such a change (it rebuilds "
            "the slice, or this table whole, from the upstream rows). Options: run again; or set "
            "source.skip_change_commits: true (only appends flow down); or run once in mode reset."
        )
    return error


def _schema_of(spark, reader, json_lines: bool, source) -> str:
    if json_lines or source.format == "text":
        return "value STRING"
    if source.format in ("csv", "json"):
        return f"{source.schema_}, `{CORRUPT}` STRING"
    return source.schema_


# --- parquet ------------------------------------------------------------------------------------

_WIDENS = {("int", "bigint"), ("smallint", "int"), ("smallint", "bigint"), ("tinyint", "smallint"),
           ("tinyint", "int"), ("tinyint", "bigint"), ("float", "double")}


def check_parquet_files(spark, spec: PipelineSpec, files: list[str]) -> None:
    """Refuse a parquet file whose columns are not the declared ones: Spark would read a missing column as
    nulls, ignore an extra one, or fail deep in a task on a type it cannot convert."""
    declared = StructType.fromDDL(spec.source.schema_)  # needs the active session: called in a batch
    want = {f.name.lower(): f for f in declared.fields}
    for file in files:
        found = {f.name.lower(): f for f in spark.read.parquet(file).schema.fields}
        problems = []
        missing = [want[n].name for n in want if n not in found]
        if missing:
            problems.append(f"missing column(s) {', '.join(missing)}")
        extra = [f"{found[n].name} {found[n].dataType.simpleString()}" for n in found if n not in want]
        if extra:
            problems.append(f"column(s) not in the schema: {', '.join(extra)}")
        for name in want.keys() & found.keys():
            have, need = found[name].dataType.simpleString(), want[name].dataType.simpleString()
            if have != need and (have, need) not in _WIDENS:
                problems.append(f"column {want[name].name} is {have} in the file, {need} in the schema")
        if problems:
            raise BatchRejected(
                f"parquet file {file} does not have the schema of source.schema ({spec.source.schema_}): "
                + "; ".join(problems)
                + ". Nothing of the batch was written and the checkpoint did not advance. Fix source.schema to "
                "match the files (or fix the file), and run again."
            )
