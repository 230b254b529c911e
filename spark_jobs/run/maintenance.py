"""Maintenance of one pipeline's tables: OPTIMIZE (compact the small files one-shot runs leave) and VACUUM
(delete the files no version within the retention needs), with a summary of what it did.

    spark-submit ... spark_jobs/maintain.py --request REQUEST.json      (the driver shell: spark_jobs.driver.job)

Runs on the sink table and, when it exists, the pipeline's quarantine table. The checkpoint is only looked
at (its size goes in the summary): the runs themselves keep it bounded
(``maintenance.checkpoint_batches_to_retain``). Like a run, maintenance holds the pipeline's lock and
appends a row (mode ``maintenance``) to the run ledger. The JSON summary is the last line of stdout.
Exit code 0 = done, 1 = failed, 2 = bad arguments or spec.
"""

from __future__ import annotations

import os
import time
from typing import Any

from sluice.contract import JobRequest, MaintenanceSummary
from sluice.spec import DELTA_SAFE_RETENTION_HOURS, PipelineSpec
from sluice.storage.checkpoint import Checkpoint
from sluice.storage.lock import check_held
from spark_jobs.driver import jit
from spark_jobs.driver.errors import describe_error
from spark_jobs.driver.job import JobFailed, JobRecord

RETENTION_CHECK_CONF = "spark.databricks.delta.retentionDurationCheck.enabled"
VACUUM_LOGGING_CONF = "spark.databricks.delta.vacuum.logging.enabled"


class MaintenanceFailed(JobFailed):
    """A maintenance step failed, or the pipeline was busy; ``summary`` says which."""


def maintain_pipeline(spark, spec: PipelineSpec, settings, job: JobRequest) -> MaintenanceSummary:
    """OPTIMIZE and VACUUM the pipeline's sink and quarantine tables as its ``maintenance:`` section says.

    Returns the summary (``files_compacted``, ``bytes_removed`` and a section per table), also appended to
    the ledger; raises :class:`MaintenanceFailed` carrying it if a step failed or the pipeline was busy.
    """
    from spark_jobs.sinks.delta_table import current_version

    jit.release(spark, "a maintenance run (OPTIMIZE rewrites tables whatever their size)")
    config = spec.maintenance
    table = spec.sink_path(settings)
    record = JobRecord(
        spec, settings, job,
        sink=table, checkpoint=spec.checkpoint_path(settings),
        delta_version_before=current_version(spark, table), delta_version_after=None,
        optimize=config.optimize, zorder_by=config.zorder_by,
        vacuum_retention_hours=config.vacuum_retention_hours if config.vacuum else None,
        files_compacted=0, files_written=0, files_removed=0, bytes_removed=0, tables={},
        checkpoint_size=Checkpoint(spec.checkpoint_path(settings)).size(),
    )
    summary = record.summary

    def body() -> None:
        try:
            for role, path in (("sink", table), ("quarantine", spec.quarantine_table_path(settings))):
                if current_version(spark, path) is None:
                    continue
                removed = remove_orphans(path, dry_run=job.dry_run)
                if removed["files"]:
                    gone = summary.orphans_removed or {"files": 0, "bytes": 0}
                    summary.orphans_removed = {"files": gone["files"] + removed["files"],
                                               "bytes": gone["bytes"] + removed["bytes"],
                                               **({"dry_run": True} if job.dry_run else {})}
                mark = time.monotonic()
                report = maintain_table(spark, path, spec, dry_run=job.dry_run)
                summary.tables[role] = report
                summary.note_phase(role, time.monotonic() - mark)
                summary.files_compacted += report.get("optimize", {}).get("files_removed", 0)
                summary.files_written += report.get("optimize", {}).get("files_added", 0)
                summary.files_removed += report.get("vacuum", {}).get("files_deleted", 0)
                summary.bytes_removed += report.get("vacuum", {}).get("bytes_deleted", 0)
            if not summary.tables:
                summary.note = f"{spec.name} has no table yet ({table}): nothing to maintain"
        except Exception as err:  # noqa: BLE001 - the summary carries the error; close() raises
            summary.error = describe_error(err)

    record.run(body)
    summary.delta_version_after = current_version(spark, table)
    return record.close(MaintenanceFailed)


def remove_orphans(path: str, *, dry_run: bool) -> dict[str, int]:
    """Delete the table's data files that no commit names (:func:`sluice.storage.delta_log.unreferenced_files`:
    left by failed runs, named in their summaries' ``orphan_files``). Safe under the pipeline's lock, which
    maintenance holds: no run of the pipeline is writing files it has not committed yet. (VACUUM deletes them
    too, once they are older than its retention.) A dry run only counts them."""
    from sluice.storage.delta_log import unreferenced_files
    from sluice.storage.files import Storage

    found = unreferenced_files(path)
    if found and not dry_run:
        check_held()
        storage = Storage(path)
        for entry in found:
            storage.delete(entry.name)
    return {"files": len(found), "bytes": sum(e.size for e in found)}


def maintain_table(spark, path: str, spec: PipelineSpec, *, dry_run: bool) -> dict[str, Any]:
    """OPTIMIZE then VACUUM one table; what each did (or, in a dry run, would do)."""
    from delta.tables import DeltaTable

    from spark_jobs.sinks.delta_table import current_version

    config = spec.maintenance
    report: dict[str, Any] = {"table": path, "version_before": current_version(spark, path)}
    delta = DeltaTable.forPath(spark, path)
    if config.optimize:
        if dry_run:
            report["optimize"] = {"skipped": "dry run", "files": _num_files(spark, path)}
        else:
            check_held()
            builder = delta.optimize()
            result = builder.executeZOrderBy(*config.zorder_by) if config.zorder_by else builder.executeCompaction()
            metrics = result.select("metrics").first()["metrics"].asDict(recursive=True)
            report["optimize"] = {
                "files_removed": int(metrics.get("numFilesRemoved") or 0),
                "files_added": int(metrics.get("numFilesAdded") or 0),
                "bytes_removed": int((metrics.get("filesRemoved") or {}).get("totalSize") or 0),
                "bytes_added": int((metrics.get("filesAdded") or {}).get("totalSize") or 0),
                "zorder_by": config.zorder_by,
            }
    if config.vacuum:
        hours = config.vacuum_retention_hours
        below_safe = hours < DELTA_SAFE_RETENTION_HOURS
        if below_safe:  # the spec said force_retention: true (validated); Delta's own check must be lifted
            spark.conf.set(RETENTION_CHECK_CONF, "false")
        try:
            # the files VACUUM deletes (and their size): listed by a dry run, then deleted
            doomed = [r[0] for r in spark.sql(f"VACUUM delta.`{path}` RETAIN {hours} HOURS DRY RUN").collect()]
            size = sum(_file_size(spark, f) for f in doomed)
            if not dry_run and doomed:
                spark.conf.set(VACUUM_LOGGING_CONF, "true")
                check_held()
                delta.vacuum(float(hours))
        finally:
            if below_safe:
                spark.conf.set(RETENTION_CHECK_CONF, "true")
        report["vacuum"] = {"retention_hours": hours, "forced": below_safe, "files_deleted": len(doomed),
                            "bytes_deleted": size, **({"dry_run": True} if dry_run else {})}
    report["version_after"] = current_version(spark, path)
    return report


def _num_files(spark, path: str) -> int:
    from sluice.storage.delta_log import log_state

    state = log_state(path)
    if state is not None:
        return state["num_files"]
    return int(spark.sql(f"DESCRIBE DETAIL delta.`{path}`").first()["numFiles"])


def _file_size(spark, path: str) -> int:
    local = path[len("file:"):] if path.startswith("file:") else path
    if "://" not in local:
        try:
            return os.path.getsize(local)
        except OSError:
            return 0
    jvm = spark.sparkContext._jvm
    hadoop_path = jvm.org.apache.hadoop.fs.Path(path)
    fs = hadoop_path.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())
    return int(fs.getFileStatus(hadoop_path).getLen())
