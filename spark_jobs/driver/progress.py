"""Watching a query: per-batch progress lines on stderr while it runs, and the batch list afterwards."""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Callable
from typing import Any

from pyspark.sql.streaming import StreamingQueryListener


class ProgressCollector(StreamingQueryListener):
    """Collects every progress report of one query and prints a line per executed batch to stderr.

    ``query.recentProgress`` keeps only the last 100 reports
    (``spark.sql.streaming.numRecentProgressUpdates``); a rate-limited catch-up can run more batches.
    Listener events arrive asynchronously, so :func:`batches_of` merges both views by batch id.

    Spark hands each event over as its JSON text (:class:`_JsonEvents`), not as PySpark's event objects:
    building one of those costs ~150 calls into the JVM, and each of its five Java maps ends its iteration with
    a Java exception that PySpark converts by asking the JVM for ~14 classes by name -- 0.3-0.9 s per report,
    measured (docs/performance.md).
    """

    def __init__(self, query_name: str, stream=None):
        self.query_name = query_name
        self.reports: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._stream = stream or sys.stderr
        self.reads_of: Callable[[int], int] | None = None
        """How many times a batch read its input (the batch writer's ``source_reads``): a batch with rows to
        set aside reads its source again for them, and Spark adds every read to the report's input rows."""

    @property
    def _jlistener(self):
        """What ``spark.streams.addListener``/``removeListener`` hand to the JVM (PySpark's own property
        wraps every event in its Python objects first): Spark's listener wrapper around :class:`_JsonEvents`."""
        from pyspark import SparkContext

        if not hasattr(self, "_jlistenerobj"):
            self._jlistenerobj = SparkContext._jvm.PythonStreamingQueryListenerWrapper(_JsonEvents(self))
        return self._jlistenerobj

    def onQueryStarted(self, event) -> None:  # noqa: N802 (Spark's API)
        pass

    def onQueryProgress(self, event) -> None:  # noqa: N802
        self.progress_json(event.progress.json)

    def progress_json(self, text: str) -> None:
        """One progress report, as Spark writes it (``StreamingQueryProgress.json``)."""
        report = json.loads(text)
        if report.get("name") != self.query_name:
            return
        with self._lock:
            self.reports.append(report)
        if is_executed(report):
            reads = self.reads_of(report["batchId"]) if self.reads_of is not None else 1
            print(progress_line(report, reads), file=self._stream, flush=True)

    def onQueryIdle(self, event) -> None:  # noqa: N802
        pass

    def onQueryTerminated(self, event) -> None:  # noqa: N802
        pass


class _JsonEvents:
    """Spark's Python listener interface, implemented through py4j: only a progress event is of use, and it is
    read with one call, its JSON text."""

    def __init__(self, collector: ProgressCollector):
        self.collector = collector

    def onQueryStarted(self, jevent) -> None:  # noqa: N802 (Spark's API)
        pass

    def onQueryProgress(self, jevent) -> None:  # noqa: N802
        self.collector.progress_json(jevent.progress().json())

    def onQueryIdle(self, jevent) -> None:  # noqa: N802
        pass

    def onQueryTerminated(self, jevent) -> None:  # noqa: N802
        pass

    class Java:
        implements = ["org.apache.spark.sql.streaming.PythonStreamingQueryListener"]


def is_executed(report: dict[str, Any]) -> bool:
    """True for a report of a micro-batch that ran (with or without data), not an idle tick."""
    return "addBatch" in report.get("durationMs", {})


PHASES = ("latestOffset", "walCommit", "getBatch", "queryPlanning", "addBatch", "commitOffsets")
"""Spark's phases of a micro-batch, in the order they run: find the end offsets, write them to the
checkpoint's offsets log, plan, write the batch (sink commit), mark it done in the checkpoint's commits log."""


def progress_line(report: dict[str, Any], reads: int = 1) -> str:
    """The batch's line on stderr. ``reads``: how many times the batch read its input; its rows are counted
    once, as the run summary counts them (``input_rows``), and the rate with them."""
    durations = report.get("durationMs", {})
    phases = ", ".join(f"{name} {durations[name]} ms" for name in PHASES if name in durations)
    reads = max(1, reads)
    line = (
        f"[sluice] {report.get('name')} batch {report['batchId']}: {report.get('numInputRows', 0) // reads} rows "
        f"in, {report.get('processedRowsPerSecond', 0.0) / reads:.0f} rows/s, {durations.get('triggerExecution', 0)} "
        f"ms ({phases})"
    )
    watermark = report.get("eventTime", {}).get("watermark")
    if watermark:
        line += f", watermark {watermark}"
    state = report.get("stateOperators") or []
    if state:
        line += f", state rows {sum(op.get('numRowsTotal', 0) for op in state)}"
    return line


def batches_of(collector_reports: list[dict[str, Any]], recent: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The executed batches of a run, one report each, in batch order."""
    by_batch: dict[int, dict[str, Any]] = {}
    for report in [*collector_reports, *recent]:
        if is_executed(report):
            by_batch[report["batchId"]] = report
    return [by_batch[b] for b in sorted(by_batch)]
