"""The driver's optimizing compiler (C2) under ``SLUICE_DRIVER_JIT=auto``: held back from the driver's start
for an incremental run of a pipeline that ran before (``sluice.launch.submit.holds_c2``: most such runs are small;
a first run, a reset, a backfill or maintenance starts with C2), and released before the query when the run
turns out to be large (``jvm/files`` ``Compilers``, which explains why).

Who decides, before any batch runs: a file source with sluice's discovery, in its first listing (its new files'
bytes against ``spark.sluice.jit.fullBytes``, 64 MiB); here, the rest: files listed by Spark's source by the
backlog's bytes (the same threshold), a Kafka source by its backlog's records once its brokers answered
(``spark.sluice.jit.fullRecords``, 500,000; a backlog that cannot be told releases it), any other run at once
(a backfill, a Delta source, a maintenance run: what they read is not measured first). Under ``full`` and ``quick``
nothing is held, and nothing here does anything. The run summary's ``driver_jit`` says what happened."""

from __future__ import annotations

import json
from concurrent.futures import Future
from typing import Any

from pyspark.sql import SparkSession


def _compilers(spark: SparkSession) -> Any:
    return spark._jvm.dev.sluice.files.Compilers


def release(spark: SparkSession, why: str) -> bool:
    """C2 released for the rest of the driver's life (when it was held); whether it was released now."""
    try:
        return bool(_compilers(spark).release(why))
    except Exception:  # noqa: BLE001 - the class is missing (a spark-submit without the project's jars): nothing held
        return False


def _release_for(spark: SparkSession, method: str, amount: int) -> None:
    """``Compilers.releaseForBytes`` or ``releaseForRecords``: C2 released at the session's threshold."""
    try:
        getattr(_compilers(spark), method)(spark._jsparkSession, amount)
    except Exception:  # noqa: BLE001 - as in release
        pass


def report(spark: SparkSession, mode: str) -> dict[str, Any] | None:
    """``{"mode", "optimizing_compiler", "released_because"}``: ``mode`` as ``SLUICE_DRIVER_JIT`` says, the rest
    as the JVM says (``Compilers.report``: held, released, on, off); None without the jar."""
    try:
        return {"mode": mode, **json.loads(_compilers(spark).report())}
    except Exception:  # noqa: BLE001 - as in release
        return None


def decide(spark: SparkSession, measured: dict | Future | None, indexed: bool) -> None:
    """Before the query: release C2 for a large backlog, or for one that is not measured. ``measured``: the
    backlog before the query (a Kafka source's, being measured: decided once it is); ``indexed``: sluice's
    discovery, whose first listing decides. The thresholds are ``Compilers``' (the session's settings)."""
    if indexed:
        return
    if isinstance(measured, Future):
        measured.add_done_callback(lambda done: _by_records(spark, done))
        return
    if measured and measured.get("source") == "files" and measured.get("bytes") is not None:
        _release_for(spark, "releaseForBytes", measured["bytes"])
        return
    release(spark, f"a {(measured or {}).get('source', 'source')} backlog not measured in bytes or records")


def _by_records(spark: SparkSession, done: Future) -> None:
    try:
        measured = done.result()
    except BaseException:  # noqa: BLE001 - said by the run; its size is unknown
        measured = None
    records = (measured or {}).get("offsets")
    if records is None:
        release(spark, "a Kafka backlog that could not be measured")
    else:
        _release_for(spark, "releaseForRecords", records)
