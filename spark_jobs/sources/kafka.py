"""The Kafka source: Spark's official connector, with a pre-flight check that fails fast and clearly.

Spark's Kafka source keeps the offsets of every micro-batch in the checkpoint (``offsets/N``), so a run
reads exactly the records that arrived since the last committed batch. Each record becomes a row with
the value's columns plus ``key``, ``topic``, ``partition``, ``offset``, ``timestamp``.

A value that is not valid JSON for the declared schema is a bad record (:mod:`spark_jobs.quality.records`): it goes
to the quarantine table with its text and ``topic/partition/offset``, never into the table as nulls. So does an
Avro value that is not in the declared wire format, has a schema id the spec does not accept, or does not decode
(:func:`avro_columns`); its quarantine row's raw text is the value's bytes in base64.
"""

from __future__ import annotations

import base64
import json
import os

from py4j.protocol import Py4JJavaError
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.avro.functions import from_avro, to_avro

from sluice.contract import KAFKA_SECRET_ENV
from sluice.spark_conf import option_text
from sluice.spec import KafkaSource, KafkaValue
from sluice.spec.avro import DECODED_FIELD, field_names, reader_schema
from spark_jobs.quality.records import json_columns, with_bad_columns


class KafkaSourceError(RuntimeError):
    """The brokers or topics are not as the spec says; the message says what to fix."""


UNREACHABLE = "Kafka broker unreachable at "
"""How a run's error begins when its brokers did not answer (at the start, or during the run)."""
UNUSABLE = "cannot use the Kafka bootstrap servers "
"""How a run's error begins when its bootstrap servers could not be used (a bad address)."""


def client_config(source: KafkaSource) -> dict[str, str]:
    """Kafka client properties (without the ``kafka.`` prefix) for this source."""
    config: dict[str, str] = {}
    # Client settings from an Airflow connection (brokers, SASL/SSL secrets), handed over by the operator
    # or `sluice run` in the spark-submit process's environment: never on the command line, never logged.
    secret = os.environ.get(KAFKA_SECRET_ENV)
    if secret:
        config.update(json.loads(base64.b64decode(secret)))
    if source.bootstrap_servers:
        config["bootstrap.servers"] = source.bootstrap_servers
    for key, value in source.options.items():
        if key.startswith("kafka."):
            config[key[len("kafka."):]] = option_text(value)
    if "bootstrap.servers" not in config:
        raise KafkaSourceError(
            f"source.connection {source.connection!r} gave no brokers: set its host (and port) in Airflow, "
            "or set source.bootstrap_servers"
        )
    timeout_ms = str(source.timeout_seconds * 1000)
    config.setdefault("request.timeout.ms", timeout_ms)
    config.setdefault("default.api.timeout.ms", timeout_ms)
    return config


def read_kafka_stream(spark: SparkSession, source: KafkaSource, *, rescue: bool = True) -> DataFrame:
    config = client_config(source)
    check_brokers_and_topics(spark, source, config)
    rate = {"maxOffsetsPerTrigger": str(source.max_offsets_per_trigger)} if source.max_offsets_per_trigger else {}
    reader = kafka_reader(spark.readStream, source, config, {"startingOffsets": source.starting_offsets, **rate})
    return records(reader.load(), source, rescue=rescue)


def kafka_reader(reader, source: KafkaSource, config: dict[str, str], offsets: dict[str, str]):
    """``reader`` (``spark.read`` or ``spark.readStream``) on the source's topics with its client settings and
    ``offsets`` (where to start and end, the rate); the spec's own reader options last: they win."""
    reader = reader.format("kafka")
    for key, value in config.items():
        reader = reader.option(f"kafka.{key}", value)
    if source.topics:
        reader = reader.option("subscribe", ",".join(source.topics))
    else:
        reader = reader.option("subscribePattern", source.subscribe_pattern)
    for key, value in offsets.items():
        reader = reader.option(key, value)
    reader = (
        reader.option("failOnDataLoss", str(source.fail_on_data_loss).lower())
        # a fetch that gets no answer fails the task (and the run) instead of waiting for the 2-minute default
        .option("kafkaConsumer.pollTimeoutMs", str(source.timeout_seconds * 1000))
        .option("fetchOffset.numRetries", "2")
    )
    for key, value in source.options.items():
        if not key.startswith("kafka."):
            reader = reader.option(key, option_text(value))
    return reader


def read_kafka_slice(spark: SparkSession, source: KafkaSource, *, start, end, ending_offsets: dict,
                     rescue: bool = True) -> DataFrame:
    """A backfill's Kafka input, one batch: the records whose timestamp is in [start, end), up to
    ``ending_offsets`` (what the stream has committed; later records are the next incremental run's).

    Reads from the earliest retained offset and filters by timestamp: resolving offsets by timestamp
    (``startingTimestamp``) would fail for a partition with no record after ``start``."""
    config = client_config(source)
    check_brokers_and_topics(spark, source, config)
    reader = kafka_reader(spark.read, source, config, {"startingOffsets": "earliest",
                                                       "endingOffsets": json.dumps(ending_offsets)})
    raw = reader.load().where((F.col("timestamp") >= F.lit(start)) & (F.col("timestamp") < F.lit(end)))
    return records(raw, source, rescue=rescue)


def records(raw: DataFrame, source: KafkaSource, *, rescue: bool = True) -> DataFrame:
    """Kafka's rows (binary key/value plus metadata) as the table's columns."""
    metadata = [
        F.col("key").cast("string").alias("key"),
        F.col("topic"),
        F.col("partition"),
        F.col("offset"),
        F.col("timestamp"),
    ]
    text = F.col("value").cast("string")
    if source.value.format == "string":
        return raw.select(text.alias("value"), *metadata)
    origin = F.concat_ws("/", F.col("topic"), F.col("partition").cast("string"), F.col("offset").cast("string"))
    if source.value.format == "avro":
        raw, columns, error = avro_columns(raw, source.value)
        return with_bad_columns(raw, [*columns, *metadata], error, F.base64(F.col("value")), origin)
    options = {k: option_text(v) for k, v in source.options.items() if not k.startswith("kafka.")}
    raw, columns, error = json_columns(raw, text, source.value.schema_, options, rescue=rescue,
                                       keep=[F.col(c) for c in ("key", "value", "topic", "partition", "offset",
                                                                "timestamp")])
    # a record without a value (a tombstone) is no JSON object either: it is a bad record too
    error = F.when(text.isNull(), F.lit(NO_VALUE)).otherwise(error)
    declared, rescued = (columns[:-1], columns[-1:]) if rescue else (columns, [])
    return with_bad_columns(raw, [*declared, *metadata, *rescued], error, text, origin)


NO_VALUE = "the record has no value (null)"
DECODED = "__sluice_decoded_value"
HEADER = 5
"""Confluent's wire format: magic byte 0, then the schema id as 4 bytes, big-endian, then the Avro body."""


def avro_columns(raw: DataFrame, value: KafkaValue) -> tuple[DataFrame, list[Column], Column]:
    """``raw`` with each value decoded once (a column of its own, like :func:`~spark_jobs.quality.records.json_columns`),
    and over it the Avro record's fields as columns and the error column (null when the record is good).

    spark-avro's ``from_avro`` in PERMISSIVE mode returns a struct of nulls, not a null, for a body that does
    not decode (https://spark.apache.org/docs/latest/sql-data-sources-avro.html#to_avro-and-from_avro), so
    the reader schema has one field more, :data:`~sluice.spec.avro.DECODED_FIELD`, which schema resolution
    sets to its default (true) only for a record that decodes. The decoder also stops at the end of the
    record without looking at what follows (a value written with a longer schema "decodes" into the first
    fields): a decoded record is encoded again and must be as long as the body."""
    schema = value.avro_schema
    names = field_names(schema)
    data = F.col("value")
    size = F.length(data)
    if value.confluent:
        body = F.substring(data, HEADER + 1, 2**31 - 1)
        schema_id = F.conv(F.hex(F.substring(data, 2, 4)), 16, 10).cast("bigint")
    else:
        body = data
    options = {"mode": "PERMISSIVE", "avroSchema": reader_schema(schema)}
    keep = [F.col(c) for c in ("key", "value", "topic", "partition", "offset", "timestamp")]
    staged = raw.select(F.inline(F.array(F.struct(*keep, from_avro(body, schema, options).alias(DECODED)))))
    decoded = F.col(DECODED)
    ok = decoded.getField(DECODED_FIELD)
    fields = [decoded.getField(n) for n in names]
    left_over = size - F.lit(HEADER if value.confluent else 0) - F.length(to_avro(F.struct(*fields), schema))
    where = value.schema_file
    error = F.when(data.isNull(), F.lit(NO_VALUE))
    if value.confluent:
        error = (
            error.when(size < HEADER, F.concat(F.lit("not Confluent wire format ("), size.cast("string"),
                                               F.lit(" bytes, shorter than its 5-byte header)")))
            .when(F.substring(data, 1, 1) != F.unhex(F.lit("00")),
                  F.concat(F.lit("not Confluent wire format (magic byte 0x"), F.lower(F.hex(F.substring(data, 1, 1))),
                           F.lit(", not 0x00)")))
        )
        if value.schema_ids != "any":
            accepted = ", ".join(str(i) for i in value.schema_ids)
            error = error.when(~schema_id.isin(*value.schema_ids),
                               F.concat(F.lit("schema id "), schema_id.cast("string"),
                                        F.lit(f" not in schema_ids [{accepted}]")))
    error = (
        error.when(ok.isNull(), F.lit(f"Avro body does not decode with schema {where}"))
        # CASE WHEN evaluates a branch only for the rows that reach it: to_avro never sees a record of nulls
        .when(left_over != 0, F.concat(F.lit(f"Avro body does not decode with schema {where}: "),
                                       left_over.cast("string"),
                                       F.lit(" byte(s) left over after the record (written with another schema?)")))
    )
    return staged, [f.alias(n) for f, n in zip(fields, names)], error


def check_brokers_and_topics(spark: SparkSession, source: KafkaSource, config: dict[str, str]) -> None:
    """Ask the brokers for their topics with the same client (and settings) the query will use.

    Without this, an unreachable broker makes the query retry for minutes, and a missing topic only
    shows up as an empty run.
    """
    jvm = spark._jvm
    props = jvm.java.util.Properties()
    for key, value in config.items():
        props.put(key, value)
    servers = config["bootstrap.servers"]
    try:
        admin = jvm.org.apache.kafka.clients.admin.Admin.create(props)
    except Py4JJavaError as err:
        raise KafkaSourceError(
            f"{UNUSABLE}{servers!r}: {_java_message(err)}. "
            "Fix source.bootstrap_servers (host:port[,host:port]) or the connection's host and port"
        ) from None
    try:
        names = set(admin.listTopics().names().get(source.timeout_seconds, jvm.java.util.concurrent.TimeUnit.SECONDS))
    except Py4JJavaError as err:
        if "Authentication" in _java_message(err) or "Authorization" in _java_message(err):
            raise KafkaSourceError(
                f"Kafka at {servers} refused the credentials ({_java_message(err)}). Check the login, password "
                "and sasl.mechanism of the connection named in source.connection"
            ) from None
        raise KafkaSourceError(
            f"{UNREACHABLE}{servers}: no answer within {source.timeout_seconds}s "
            f"({_java_message(err)}). Check that the broker is up and that source.bootstrap_servers / the "
            "connection and its security settings are right; the next run resumes where the last one stopped"
        ) from None
    finally:
        admin.close(jvm.java.time.Duration.ofSeconds(2))
    if source.topics:
        missing = [t for t in source.topics if t not in names]
        if missing:
            existing = ", ".join(sorted(n for n in names if not n.startswith("__"))) or "none"
            raise KafkaSourceError(
                f"topic(s) {', '.join(missing)} do not exist on {servers} (existing topics: {existing}). "
                "Create them, or fix source.topics"
            )


def sample_values(spark: SparkSession, source: KafkaSource, count: int) -> list[str]:
    """At most ``count`` values (as text, tombstones left out) for the first run to infer a json value's
    schema from (:mod:`spark_jobs.sources.inference`): one batch query with the stream's client settings, from
    ``starting_offsets`` to the latest offsets, the first ``count`` records: the ones the stream's first run
    will read first. With ``latest`` that run reads none of the records there now, so the sample is the
    newest ones: the last ``count`` of each partition, of which the newest ``count`` by timestamp."""
    config = client_config(source)
    check_brokers_and_topics(spark, source, config)  # a missing topic is said as the stream would say it
    starting = source.starting_offsets
    if starting == "latest":
        offsets = newest_offsets(spark, source, config, count)
        if not offsets:  # a pattern that matches no topic yet: no partition to read
            return []
        starting = json.dumps(offsets)
    reader = kafka_reader(spark.read, source, config, {"startingOffsets": starting, "endingOffsets": "latest"})
    raw = reader.load().where(F.col("value").isNotNull())
    if source.starting_offsets == "latest":
        raw = raw.orderBy(F.col("timestamp").desc(), F.col("offset").desc())
    return [row.value for row in raw.select(F.col("value").cast("string").alias("value")).limit(count).collect()]


def newest_offsets(spark: SparkSession, source: KafkaSource, config: dict[str, str],
                   count: int) -> dict[str, dict[str, int]]:
    """Per partition of the source's topics, the offset ``count`` records before its end (its earliest
    retained offset when it holds fewer), as ``startingOffsets`` JSON takes them: a batch read from there
    holds at most ``count`` records per partition, the newest. Asked with the query's client settings."""
    jvm = spark._jvm
    props = jvm.java.util.Properties()
    for key, value in config.items():
        props.put(key, value)
    for key in ("key.deserializer", "value.deserializer"):
        props.put(key, "org.apache.kafka.common.serialization.ByteArrayDeserializer")
    props.put("enable.auto.commit", "false")
    timeout = jvm.java.time.Duration.ofSeconds(source.timeout_seconds)
    where = ", ".join(source.topics) if source.topics else source.subscribe_pattern
    consumer = jvm.org.apache.kafka.clients.consumer.KafkaConsumer(props)
    try:
        if source.topics:
            names = list(source.topics)
        else:
            pattern = jvm.java.util.regex.Pattern.compile(source.subscribe_pattern)
            names = sorted(n for n in consumer.listTopics(timeout).keySet() if pattern.matcher(n).matches())
        partitions = jvm.java.util.ArrayList()
        for name in names:
            for info in consumer.partitionsFor(name, timeout):
                partitions.add(jvm.org.apache.kafka.common.TopicPartition(name, info.partition()))
        begin = consumer.beginningOffsets(partitions, timeout)
        end = consumer.endOffsets(partitions, timeout)
        offsets: dict[str, dict[str, int]] = {}
        for tp in partitions:
            offsets.setdefault(tp.topic(), {})[str(tp.partition())] = max(begin.get(tp), end.get(tp) - count)
        return offsets
    except Py4JJavaError as err:
        raise KafkaSourceError(f"cannot read the offsets of {where} at {config['bootstrap.servers']}: "
                               f"{_java_message(err)}") from None
    finally:
        consumer.close(jvm.java.time.Duration.ofSeconds(2))


def explain_failure(source: KafkaSource, error: str) -> str:
    """Say in the user's words what a Kafka client error in a failed query means."""
    where = source.bootstrap_servers or f"the brokers of connection {source.connection!r}"
    if "org.apache.kafka.common.errors.TimeoutException" in error:
        return (
            f"{UNREACHABLE}{where} during the run: no answer within {source.timeout_seconds}s "
            "(source.timeout_seconds). Batches committed before stay committed; the next run resumes from "
            f"there. Kafka said: {error.split('TimeoutException: ', 1)[-1]}"
        )
    if "OffsetOutOfRangeException" in error or "failOnDataLoss" in error:
        return (
            f"records are missing from Kafka at {where} (deleted by retention, or the topic was re-created) "
            "before this pipeline read them. To skip the gap knowingly, set source.fail_on_data_loss: false "
            f"for one run. Spark said: {error}"
        )
    return error


def _java_message(err: Py4JJavaError) -> str:
    cause = err.java_exception
    while cause.getCause() is not None:
        cause = cause.getCause()
    return f"{cause.getClass().getSimpleName()}: {cause.getMessage()}"
