"""What a run's query did, for its summary: the batches it ran, with their offsets, files, versions and counts."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sluice.contract import BatchReport, SourceReport
from sluice.spec import KafkaSource
from sluice.storage.checkpoint import Checkpoint
from spark_jobs.batch.writer import source_reads
from spark_jobs.driver.context import Run
from spark_jobs.driver.progress import ProgressCollector, batches_of
from spark_jobs.sinks.delta_table import as_json, commits_since
from spark_jobs.sinks.table import Target

COUNTS = ("bad_records", "quarantined_rows", "dropped_rows", "rescued_rows")


def totals(stats) -> dict[str, int]:
    totals = dict.fromkeys(COUNTS, 0)
    for entry in stats:
        for key in COUNTS:
            totals[key] += int(entry.get(key) or 0)
    return totals


@dataclass(frozen=True)
class Ran:
    """A query that ran: its progress reports and its writer's per-batch counts."""

    query: Any
    collector: ProgressCollector
    stats: dict[int, dict[str, Any]]


def ran_batches(run: Run, ran: Ran, target: Target, *, before: int | None, latest: int | None) -> dict[str, Any]:
    """The summary keys of the batches a query ran (``micro_batches`` and their totals), for the run's
    summary or the reingest part: offsets and files from its checkpoint, versions from the table's history
    (the versions after ``before`` and through ``latest``; None in a dry run, whose table is a scratch one)."""
    spark, spec, stats, query = run.spark, run.spec, ran.stats, ran.query
    target_table, target_checkpoint, app_id = run.target.table, target.checkpoint, target.app_id
    reports = batches_of(ran.collector.reports, list(query.recentProgress))
    query_id = str(query.id)
    if not reports:  # no batch ran: nothing to look up in the table's history
        return {}
    commits = commits_since(spark, target_table, before, query_id, latest=latest, app_id=app_id)
    if before is not None and any(r["batchId"] not in commits for r in reports):
        # A batch with no new commit is either empty or a replay Delta skipped because the table already
        # has this query's transaction for it: look for that earlier commit.
        commits = {**commits_since(spark, target_table, None, query_id, app_id=app_id), **commits}
    batches, read = [], Checkpoint(target_checkpoint)
    for report in reports:
        batch_id = report["batchId"]
        commit = commits.get(batch_id)
        batch_stats = stats.get(batch_id) or {}
        reads = source_reads(stats, batch_id)
        replayed = commit is not None and before is not None and commit["version"] <= before
        sources = []
        for index, source in enumerate(report.get("sources", [])):
            files = None if isinstance(spec.source, KafkaSource) else read.files_of_batch(batch_id, index)
            sources.append(SourceReport(
                description=source.get("description"),
                start_offset=as_json(source.get("startOffset")),
                end_offset=as_json(source.get("endOffset")),
                input_rows=source.get("numInputRows", 0) // reads,
                **({"files": files} if files is not None else {}),
            ))
        batches.append(BatchReport(
            batch_id=batch_id,
            input_rows=report.get("numInputRows", 0) // reads,
            # None: no commit by this run; see replay_of_version
            delta_version=commit["version"] if commit and not replayed else None,
            output_rows=commit["output_rows"] if commit and not replayed else 0,
            **({"merge": commit.get("merge") if commit and not replayed else None} if spec.sink.mode in ("merge", "scd2") else {}),
            # a batch re-run after a crash that Delta had committed already (in this version) and skipped
            replay_of_version=commit["version"] if replayed else None,
            **{key: batch_stats.get(key, 0) for key in COUNTS},
            **({"expectations": batch_stats["expectations"]} if "expectations" in batch_stats else {}),
            **({"added_columns": batch_stats["added_columns"]} if batch_stats.get("added_columns") else {}),
            duration_ms=report.get("durationMs", {}),
            watermark=report.get("eventTime", {}).get("watermark"),
            sources=sources,
        ))
    written = [b for b in batches if b.replay_of_version is None]  # a replay Delta skipped wrote nothing
    # ... in the sink: a replay after a crash between a batch's sink commit and its quarantine rows wrote those
    set_aside = [b for b in batches if b in written or stats.get(b.batch_id, {}).get("quarantine_committed")]
    expectations: dict[str, dict[str, Any]] = {}
    for batch in written:
        for name, entry in (batch.expectations or {}).items():
            total = expectations.setdefault(name, {**entry, "violations": 0})
            total["violations"] += entry["violations"]
    added = sorted({c for b in written for c in b.added_columns or []})
    return {
        "micro_batches": batches,
        "batches": len(batches),
        "input_rows": sum(b.input_rows for b in batches),
        "output_rows": sum(b.output_rows for b in batches),
        "skipped_batches": [b.batch_id for b in batches if b.replay_of_version is not None],
        **totals(b.model_dump() for b in set_aside),
        "expectations": expectations,
        **({"added_columns": added} if added else {}),
    }
