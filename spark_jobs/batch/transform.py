"""The transform: a pure function of the input DataFrame (watermark, dedupe, then the spec's SQL)."""

from __future__ import annotations

from pathlib import Path

from pyspark.sql import DataFrame, SparkSession

from sluice.settings import Settings
from sluice.spark_conf import option_text
from sluice.spec import RESCUED_COLUMN, PipelineSpec, Transform
from spark_jobs.driver.errors import describe_error
from spark_jobs.quality.records import good_rows
from spark_jobs.sinks.scd2 import history_schema

SOURCE_VIEW = "source"


def apply_transform(df: DataFrame, transform: Transform | None) -> DataFrame:
    """Apply ``transform`` to ``df``; the SQL reads ``df`` as the temp view ``source`` (and the reference
    tables registered by :func:`register_tables`)."""
    if transform is None:
        return df
    if transform.watermark is not None:
        df = df.withWatermark(transform.watermark.column, transform.watermark.delay)
    if transform.dedupe:
        # state is kept for the watermark's delay only: a duplicate arriving later than that gets through
        # https://spark.apache.org/docs/latest/streaming/apis-on-dataframes-and-datasets.html#streaming-deduplication
        # A batch (a backfill, a rebuild of a slice) has all its rows at hand: one row per key
        df = df.dropDuplicatesWithinWatermark(transform.dedupe) if df.isStreaming else df.dropDuplicates(transform.dedupe)
    if transform.sql:
        df.createOrReplaceTempView(SOURCE_VIEW)
        df = df.sparkSession.sql(transform.sql)
    return df


class ReferenceTableError(RuntimeError):
    """A reference table of ``transform.tables`` cannot be read."""


def register_tables(spark: SparkSession, transform: Transform | None, settings: Settings) -> None:
    """Read each reference table once and register it as a temp view for the transform's SQL."""
    if transform is None:
        return
    for name, table in transform.tables.items():
        path = table.path if ("://" in table.path or Path(table.path).is_absolute()) else str(settings.home / table.path)
        if "://" not in path and not Path(path).exists():
            raise ReferenceTableError(
                f"transform.tables.{name}.path: {path} does not exist (relative paths start at the project folder "
                f"{settings.home}, env SLUICE_HOME)"
            )
        reader = spark.read.format(table.format)
        if table.schema_:
            reader = reader.schema(table.schema_)
        for key, value in table.options.items():
            reader = reader.option(key, option_text(value))
        reader.load(path).createOrReplaceTempView(name)


class ExpectationError(ValueError):
    """An expectation's rule cannot be evaluated over the transformed rows."""


def query_output(spark: SparkSession, spec: PipelineSpec, source):
    """The query's streaming DataFrame, whether the transform runs per batch (stateless) or in the query
    (stateful), and the schema of the sink table (the rows the sink gets; an scd2 sink's two more columns)."""
    clean = good_rows(source)
    if spec.is_stateful():
        query_df = apply_transform(clean, spec.transform)
        if "_metadata" in query_df.columns:
            query_df = query_df.drop("_metadata")
        out = query_df
    else:
        query_df = source
        out = apply_transform(clean, spec.transform)
        if "_metadata" in out.columns:
            out = out.drop("_metadata")
    if spec.schema_evolution == "add_columns" and RESCUED_COLUMN in out.columns:
        out = out.drop(RESCUED_COLUMN)
    for expectation in spec.expectations:
        try:
            out.selectExpr(f"CAST(({expectation.rule}) AS BOOLEAN)").schema  # noqa: B018 - analysis only
        except Exception as err:  # noqa: BLE001 - AnalysisException / ParseException
            raise ExpectationError(
                f"expectations.{expectation.name}.rule: {expectation.rule!r} is not a Spark SQL boolean over the "
                f"transformed row (columns: {', '.join(out.columns)}): {describe_error(err)}"
            ) from None
    schema = out.schema
    if spec.sink.mode == "scd2":
        # the history table's columns: the rows', then __start_at / __end_at
        schema = history_schema(spec.sink, schema)
    return query_df, spec.is_stateful(), schema
