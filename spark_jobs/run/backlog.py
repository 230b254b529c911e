"""A run's backlog: what waited for the pipeline when the run began (``backlog_before``) and when it ended
(``backlog_after``), in the shape of :mod:`sluice.operations.backlog`.

Files found by sluice's discovery (``source.discovery: index``) are measured by the query's own listings:
the first one's new files, and one more against the index after the run (the log's text is not read again).
Other sources, and a query that never listed, are measured as ``sluice backlog`` measures them."""

from __future__ import annotations

from pyspark.sql import SparkSession

from sluice.settings import Settings
from sluice.spec import KafkaSource, PipelineSpec
from spark_jobs.sources.files import (
    backlog_after,
    forget_source,
    indexed,
    source_backlog,
)


def measure(spec: PipelineSpec, settings: Settings) -> dict:
    """What waits for the pipeline now (:mod:`sluice.operations.backlog`); Kafka asked with the run's own
    client settings (the connection's secrets included)."""
    from sluice.operations import backlog

    config = None
    if isinstance(spec.source, KafkaSource):
        from spark_jobs.sources.kafka import KafkaSourceError, client_config

        try:
            config = client_config(spec.source)
        except KafkaSourceError:
            config = None  # said by the run itself
    return backlog.measure(spec, settings, timeout_seconds=getattr(spec.source, "timeout_seconds", 10),
                           kafka_config=config)


def before_query(spec: PipelineSpec, settings: Settings) -> dict | None:
    """The backlog measured before the query; None when the query's first listing will say it."""
    return None if indexed(spec) else measure(spec, settings)


def after_query(spec: PipelineSpec, settings: Settings, discovery: dict | None, measured: dict | None) -> dict:
    """``backlog_before`` once the query ran: ``measured`` before it, else its first listing's new files
    (taken out of the query's ``discovery`` report, which keeps what discovery cost)."""
    return measured or source_backlog((discovery or {}).pop("backlog_before", None)) or measure(spec, settings)


def at_end(spark: SparkSession, spec: PipelineSpec, settings: Settings, checkpoint: str) -> dict:
    """``backlog_after``: one more listing by the query's source, or measured here."""
    return (backlog_after(spark, checkpoint) if indexed(spec) else None) or measure(spec, settings)


def forget(spark: SparkSession, spec: PipelineSpec, checkpoint: str) -> None:
    """Drops the source the JVM kept for :func:`at_end` (a dry run's, a failed run's)."""
    if indexed(spec):
        forget_source(spark, checkpoint)
