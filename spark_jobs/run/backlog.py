"""A run's backlog: what waited for the pipeline when the run began (``backlog_before``) and when it ended
(``backlog_after``), in the shape of :mod:`sluice.operations.backlog`.

Files found by sluice's discovery (``source.discovery: index``) are measured by the query's own listings:
the first one's new files, and one more against the index after the run (the log's text is not read again).
Other sources, and a query that never listed, are measured as ``sluice backlog`` measures them. A Kafka
source's backlog before the run is asked of its brokers on a thread of its own while the query starts (from
where the checkpoint stood before it): a broker that does not answer then costs the run one
``timeout_seconds``, the query's own check, not one more before it; and after a run that failed because its
brokers did not answer (or could not be used), they are not asked again, nor waited for."""

from __future__ import annotations

import threading
from concurrent.futures import Future

from pyspark.sql import SparkSession

from sluice.settings import Settings
from sluice.spec import KafkaSource, PipelineSpec
from sluice.storage.checkpoint import Checkpoint
from spark_jobs.sources.files import (
    backlog_after,
    forget_source,
    indexed,
    source_backlog,
)
from spark_jobs.sources.kafka import (
    UNREACHABLE,
    UNUSABLE,
    KafkaSourceError,
    client_config,
)

UNANSWERED = (UNREACHABLE, UNUSABLE)
"""How a run's error begins when its Kafka brokers did not answer or could not be used."""
NOT_ASKED = {"source": "kafka", "measured_in_s": 0.0,
             "error": "not measured: the run failed because its Kafka brokers did not answer (see its error)"}


def measure(spec: PipelineSpec, settings: Settings, **kafka: tuple) -> dict:
    """What waits for the pipeline now (:mod:`sluice.operations.backlog`); Kafka asked with the run's own
    client settings (the connection's secrets included). ``kafka_committed``: as
    :func:`sluice.operations.backlog.measure` takes it."""
    from sluice.operations import backlog

    config = None
    if isinstance(spec.source, KafkaSource):
        try:
            config = client_config(spec.source)
        except KafkaSourceError:
            config = None  # said by the run itself
    return backlog.measure(spec, settings, timeout_seconds=getattr(spec.source, "timeout_seconds", 10),
                           kafka_config=config, **kafka)


def before_query(spec: PipelineSpec, settings: Settings) -> dict | Future | None:
    """The backlog measured before the query (a Kafka source's: being measured, beside the query's start);
    None when the query's first listing will say it."""
    if indexed(spec):
        return None
    if not isinstance(spec.source, KafkaSource):
        return measure(spec, settings)
    committed = (Checkpoint(spec.checkpoint_path(settings)).last_offset(),)  # before the query commits a batch
    measured: Future = Future()

    def work() -> None:
        try:
            measured.set_result(measure(spec, settings, kafka_committed=committed))
        except BaseException as err:  # noqa: BLE001 - handed to after_query's result()
            measured.set_exception(err)

    threading.Thread(target=work, name="sluice-backlog", daemon=True).start()
    return measured


def after_query(spec: PipelineSpec, settings: Settings, discovery: dict | None,
                measured: dict | Future | None, error: str | None = None) -> dict:
    """``backlog_before`` once the query ran: ``measured`` before it (not waited for when the run's ``error``
    says its Kafka brokers did not answer), else its first listing's new files (taken out of the query's
    ``discovery`` report, which keeps what discovery cost)."""
    if isinstance(measured, Future):
        measured = measured.result() if measured.done() or not _unanswered(spec, error) else NOT_ASKED
    return measured or source_backlog((discovery or {}).pop("backlog_before", None)) or measure(spec, settings)


def at_end(spark: SparkSession, spec: PipelineSpec, settings: Settings, checkpoint: str,
           error: str | None = None) -> dict:
    """``backlog_after``: one more listing by the query's source, or measured here; not asked of Kafka
    brokers that the run's ``error`` says did not answer."""
    if _unanswered(spec, error):
        return NOT_ASKED
    return (backlog_after(spark, checkpoint) if indexed(spec) else None) or measure(spec, settings)


def _unanswered(spec: PipelineSpec, error: str | None) -> bool:
    return bool(error) and isinstance(spec.source, KafkaSource) and error.startswith(UNANSWERED)


def forget(spark: SparkSession, spec: PipelineSpec, checkpoint: str) -> None:
    """Drops the source the JVM kept for :func:`at_end` (a dry run's, a failed run's)."""
    if indexed(spec):
        forget_source(spark, checkpoint)
