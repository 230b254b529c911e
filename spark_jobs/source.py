"""Sources: turn a spec's ``source:`` into a streaming DataFrame (files here, Kafka in kafka_source)."""

from __future__ import annotations

from pathlib import Path

from pyspark.sql import DataFrame, SparkSession

from sluice.settings import Settings
from sluice.spark_conf import option_text
from sluice.spec import KafkaSource, PipelineSpec
from spark_jobs.kafka_source import read_kafka_stream

KEEP_EVERY_FILE = "36500d"


class SourceError(RuntimeError):
    """The source cannot be read as the spec says; the message says what to fix."""


def read_stream(spark: SparkSession, spec: PipelineSpec, settings: Settings) -> DataFrame:
    source = spec.source
    if isinstance(source, KafkaSource):
        return read_kafka_stream(spark, source)
    path = spec.source_path(settings)
    if "://" not in path and not Path(path).is_dir():
        raise SourceError(
            f"source.path: {path} is not a folder. Create it (files land there) or fix source.path in the "
            f"spec; relative paths start at the lake root {settings.lake_root} (env SLUICE_LAKE_ROOT)."
        )
    reader = spark.readStream.format(source.format)
    # Spark ignores, after the first batch, files whose modification time is more than maxFileAge (default
    # 7 days) older than the newest file seen: a re-delivered old export (cp -p, rsync -a) would be skipped
    # without a word. Keep every file; a spec can still set maxFileAge in options.
    # https://spark.apache.org/docs/latest/structured-streaming-programming-guide.html#input-sources
    reader = reader.option("maxFileAge", KEEP_EVERY_FILE)
    if source.schema_:
        reader = reader.schema(source.schema_)
    for key, value in source.options.items():
        reader = reader.option(key, option_text(value))
    if source.max_files_per_trigger:
        reader = reader.option("maxFilesPerTrigger", str(source.max_files_per_trigger))
    return reader.load(path)
