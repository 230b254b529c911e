"""A source's schema without ``source.schema`` (or a Kafka json value's without ``source.value.schema``):
inferred by the first run, read back by every later one.

Spark's streaming file source does not infer a schema (``spark.sql.streaming.schemaInference`` would infer
it again on every run, from whatever files are there: a type could change between runs without a word).
sluice infers it once, from a bounded sample read with Spark's batch reader, and stores it in the
checkpoint (:mod:`sluice.schema.stored`). https://spark.apache.org/docs/latest/structured-streaming-programming-guide.html#schema-inference-and-partition-of-streaming-dataframesdatasets

A Kafka json value's sample is a batch read of the topic(s) with the stream's client settings
(https://spark.apache.org/docs/latest/streaming/structured-streaming-kafka-integration.html#creating-a-kafka-source-for-batch-queries),
its values inferred with Spark's JSON reader, as a file's lines are.
"""

from __future__ import annotations

import json

from pyspark.sql import SparkSession
from pyspark.sql.types import DataType, StructType

from sluice.schema.stored import (
    SchemaVersion,
    ddl_text,
    hinted_version,
    history,
    infers_schema,
    now,
    schema_hints,
    with_hints,
    with_schema,
)
from sluice.settings import Settings
from sluice.spark_conf import option_text
from sluice.spec import (
    KAFKA_COLUMNS,
    RESCUED_COLUMN,
    KafkaSchemaInference,
    KafkaSource,
    PipelineSpec,
    SchemaInference,
)
from sluice.spec.ddl import DdlError, parse_ddl_schema
from sluice.storage.files import Storage
from spark_jobs.sources.kafka import sample_values

CORRUPT_RECORD = "_corrupt_record"
"""The column Spark's JSON and CSV inference adds for a malformed record of the sample: never a source column."""


class InferenceError(RuntimeError):
    """The schema cannot be inferred; the message says what to do."""


def source_schema(spark: SparkSession, spec: PipelineSpec, settings: Settings, checkpoint: str,
                  run_id: str) -> tuple[PipelineSpec, list[SchemaVersion], SchemaVersion | None]:
    """The spec the run reads with, the stored versions (oldest first) and the one inferred now (None when
    one is stored, or the spec declares its schema: then the spec is returned as it is, with no versions)."""
    if not infers_schema(spec):
        return spec, [], None
    versions = history(checkpoint)
    if versions:
        changed = hinted_version(versions[-1], schema_hints(spec), run_id=run_id)
        if changed is not None:
            if spec.source.format == "csv" and changed.added_columns:
                raise InferenceError(_csv_hint_message(changed.added_columns, f"the stored schema (version "
                                                       f"{versions[-1].version})", versions[-1].ddl))
            versions = [*versions, changed]  # stored with the others before the query starts
        return with_schema(spec, versions[-1].ddl), versions, None
    inferred = infer(spark, spec, settings, run_id)
    return with_schema(spec, inferred.ddl), [inferred], inferred


def sample_files(spec: PipelineSpec, settings: Settings) -> list[str]:
    """The files to infer from: the oldest first (the file source's order), up to ``inference``'s bounds;
    at least one file, whatever its size. Hidden files (``.``, ``_``) are skipped, as Spark skips them."""
    bounds = spec.source.inference or SchemaInference()
    root = Storage(spec.source_path(settings))
    entries = [e for e in root.walk_entries()
               if not any(part.startswith((".", "_")) for part in e.name.split("/"))]
    entries.sort(key=lambda e: (e.mtime_ns, e.name))
    chosen, size = [], 0
    for entry in entries[: bounds.max_files]:
        if chosen and size + entry.size > bounds.max_bytes:
            break
        chosen.append(root.uri_of(entry.name))
        size += entry.size
    return chosen


def infer(spark: SparkSession, spec: PipelineSpec, settings: Settings, run_id: str) -> SchemaVersion:
    """Version 0 of the source's schema: the sample's columns (csv: STRING unless ``inferSchema: true``),
    with ``schema_hints`` over them. A Kafka source: :func:`infer_kafka`."""
    if isinstance(spec.source, KafkaSource):
        return infer_kafka(spark, spec, run_id)
    source = spec.source
    path = spec.source_path(settings)
    files = sample_files(spec, settings)
    if not files:
        raise InferenceError(
            f"source.schema: no files to infer the schema from in {path}; land a file there (the first run "
            "infers the schema from the files it finds), or declare source.schema"
        )
    options = {key: option_text(value) for key, value in source.options.items()}
    # a CSV value is text: "02134" is a zip code, not the integer 2134. Types are inferred only when the spec
    # asks for it (options.inferSchema: true), or hinted per column (schema_hints)
    if source.format == "csv":
        options.setdefault("inferSchema", "false")
        options.setdefault("multiLine", "true")  # as the stream reads csv: a quoted value may hold a line break
    options.setdefault("basePath", path)  # partition folders (dt=2026-11-01) are columns, as in the stream
    reader = spark.read.format(source.format)
    for key, value in options.items():
        reader = reader.option(key, value)
    schema = reader.load(files).schema
    columns = [(f.name, type_ddl(spark, f.dataType)) for f in schema.fields if f.name != CORRUPT_RECORD]
    if not columns:
        raise InferenceError(f"source.schema: the files sampled in {path} hold no columns ({files[0]}, ...); "
                             "declare source.schema")
    if source.format == "csv" and source.schema_hints:
        # a csv row's values are matched to the columns by position: a column the files do not have cannot
        # be added, every row would have one value too few
        have = {name.lower() for name, _ in columns}
        missing = [name for name, _ in parse_ddl_schema(source.schema_hints) if name.lower() not in have]
        if missing:
            raise InferenceError(_csv_hint_message(missing, f"the csv files sampled in {path}",
                                                   ", ".join(name for name, _ in columns)))
    ddl = ddl_text(with_hints(columns, source.schema_hints))
    try:
        parse_ddl_schema(ddl)
    except DdlError as err:  # a column name sluice's DDL cannot write (a space, a dot in a JSON key)
        raise InferenceError(f"source.schema: the schema inferred from {path} cannot be written as a schema "
                             f"sluice reads ({err}); declare source.schema") from None
    return SchemaVersion(version=0, ddl=ddl, created_at=now(), run_id=run_id, reason="inferred",
                         files=files, hints=source.schema_hints)


def infer_kafka(spark: SparkSession, spec: PipelineSpec, run_id: str) -> SchemaVersion:
    """Version 0 of a Kafka json value's schema: the columns of at most ``value.inference.max_records``
    values, read in one batch query from ``starting_offsets`` to the latest offsets, with ``schema_hints``
    over them. Values that are not JSON objects (and tombstones) are left out of the sample; fields named
    like the columns sluice adds (``key``, ``topic``, ...) are left out of the schema (they stay in
    ``_rescued``)."""
    source = spec.source
    where = f"topic(s) {', '.join(source.topics)}" if source.topics else f"topics matching {source.subscribe_pattern}"
    values = sample_values(spark, source, (source.value.inference or KafkaSchemaInference()).max_records)
    if not values:
        raise InferenceError(
            f"source.value.schema: no records to infer the schema from in {where} (from starting_offsets "
            f"{source.starting_offsets}); produce a record (the first run infers the schema from the records "
            "it finds), or declare source.value.schema"
        )
    jvm = spark._jvm
    texts = spark.createDataFrame([(v,) for v in values], "value STRING")
    reader = spark._jsparkSession.read()
    options = {k: option_text(v) for k, v in source.options.items() if not k.startswith("kafka.")}
    for key, value in options.items():  # the JSON options the stream parses the values with
        reader = reader.option(key, value)
    schema = StructType.fromJson(json.loads(
        reader.json(getattr(texts._jdf, "as")(jvm.org.apache.spark.sql.Encoders.STRING())).schema().json()))
    reserved = (*KAFKA_COLUMNS, RESCUED_COLUMN)
    columns = [(f.name, type_ddl(spark, f.dataType)) for f in schema.fields
               if f.name != CORRUPT_RECORD and f.name.lower() not in reserved]
    if not columns:
        raise InferenceError(f"source.value.schema: the {len(values)} record(s) sampled in {where} hold no JSON "
                             "object with fields; declare source.value.schema")
    ddl = ddl_text(with_hints(columns, source.value.schema_hints))
    try:
        parse_ddl_schema(ddl)
    except DdlError as err:  # a field name sluice's DDL cannot write (a space, a dot)
        raise InferenceError(f"source.value.schema: the schema inferred from {where} cannot be written as a "
                             f"schema sluice reads ({err}); declare source.value.schema") from None
    return SchemaVersion(version=0, ddl=ddl, created_at=now(), run_id=run_id, reason="inferred",
                         records=len(values), topics=list(source.topics or [source.subscribe_pattern]),
                         hints=source.value.schema_hints)


def _csv_hint_message(missing: list[str], where: str, columns: str) -> str:
    return (f"source.schema_hints: column(s) {', '.join(missing)} are not in {where} (columns: {columns}); "
            "csv values are matched to columns by position, so hint only columns the files have (or declare "
            "source.schema)")


def type_ddl(spark: SparkSession, data_type: DataType) -> str:
    """A Spark type as DDL (``BIGINT``, ``ARRAY<STRUCT<a: STRING>>``), written by Spark itself."""
    return spark._jvm.org.apache.spark.sql.types.DataType.fromJson(data_type.json()).sql()
