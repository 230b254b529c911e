"""The contract between a launcher (``sluice run``, the Airflow task) and the Spark driver, on the ground floor.

One job goes one way: the launcher writes a :class:`JobRequest` to ONE request file and passes its path to
the driver (``spark_jobs/driver/job.py``); the driver runs the job and writes the summary (a
:class:`RunSummary` or a :class:`MaintenanceSummary`) to the request's ``summary_file``; the launcher reads it
back as that model. The JSON is the run summary that the ledger, ``sluice status`` and XCom carry, key for
key (:meth:`Summary.to_json`).

Imports neither Airflow nor PySpark.
"""

from __future__ import annotations

import json
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, PrivateAttr

from sluice.contract.request import BackfillSlice, RunRequest
from sluice.spec import Trigger

KAFKA_SECRET_ENV = "SLUICE_KAFKA_SECRET_CONFIG"
"""Kafka client settings from an Airflow connection (SASL/SSL secrets included), base64 JSON, for the driver:
in the driver's environment only, never in the request file or on a command line."""

JobKind = Literal["run", "maintain"]


def iso(epoch: float) -> str:
    """A summary's timestamps (``started_at``, ``ended_at``): UTC, to the second."""
    return datetime.fromtimestamp(epoch, timezone.utc).isoformat(timespec="seconds")


class AirflowIds(BaseModel):
    """The Airflow task instance that launched a job (for the summary and the ledger)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    dag_id: str
    dag_run_id: str
    try_number: int


class JobRequest(BaseModel):
    """One job for the driver: a run of a pipeline (``kind: run``) or its maintenance (``kind: maintain``).

    ``run`` is the validated run request (:func:`sluice.contract.request.run_request`): mode, trigger, dry run,
    the run's own rate limits and backfill slice. A maintenance job uses only its ``dry_run``.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: JobKind = "run"
    spec_path: str = ""
    run_id: str = "adhoc"
    airflow: AirflowIds | None = None
    run: RunRequest = RunRequest(mode="incremental", trigger="available_now")
    summary_file: str | None = None
    reset_checkpoint: bool = False
    """Start a new checkpoint even in a dry run (a run that follows an upstream rewrite it cannot slice)."""
    write_ledger: bool = True
    """Append the summary to the run ledger (tests that look at one run turn it off)."""

    # --- what the run is asked to do ----------------------------------------------------------------------
    @property
    def trigger(self) -> Trigger:
        return self.run.trigger  # type: ignore[return-value]

    @property
    def dry_run(self) -> bool:
        return self.run.dry_run

    @property
    def reset(self) -> bool:
        """Start a new checkpoint and replace the table's content from the source."""
        return self.run.reset or self.reset_checkpoint

    @property
    def backfill(self) -> BackfillSlice | None:
        return self.run.backfill

    @property
    def mode(self) -> str:
        """The summary's and ledger's ``mode``."""
        if self.kind == "maintain":
            return "maintenance"
        if self.backfill is not None:
            return "backfill"
        return "dry_run" if self.dry_run else "reset" if self.reset else "incremental"

    def as_reset(self) -> JobRequest:
        """This run, made a reset (an upstream change this table cannot follow slice by slice)."""
        return self.model_copy(update={"reset_checkpoint": True})

    def holder(self) -> dict[str, Any]:
        """Who holds the pipeline's lock while this job runs."""
        extra = {"mode": "maintenance"} if self.kind == "maintain" else {}
        return {"run_id": self.run_id, **extra, **(self.airflow.model_dump() if self.airflow else {})}

    # --- the request file ----------------------------------------------------------------------------------
    def write(self, path: str | Path) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(self.model_dump_json(indent=1), encoding="utf-8")
        return path

    @classmethod
    def read(cls, path: str | Path) -> JobRequest:
        return cls.model_validate_json(Path(path).read_text(encoding="utf-8"))


def run_job(*, trigger: Trigger = "available_now", dry_run: bool = False, reset: bool = False,
            backfill: BackfillSlice | None = None, run_id: str = "adhoc", airflow: AirflowIds | dict | None = None,
            write_ledger: bool = True, spec_path: str = "", max_files_per_trigger: int | None = None,
            max_offsets_per_trigger: int | None = None) -> JobRequest:
    """A run's request built in code (the warm-up run, tests); launchers validate theirs with ``run_request``."""
    mode = "backfill" if backfill is not None else "reset" if reset else "dry_run" if dry_run else "incremental"
    run = RunRequest(mode=mode, trigger=trigger, dry_run=dry_run, backfill=backfill,
                     max_files_per_trigger=max_files_per_trigger, max_offsets_per_trigger=max_offsets_per_trigger)
    return JobRequest(kind="run", spec_path=spec_path, run_id=run_id, airflow=airflow, run=run,
                      reset_checkpoint=reset, write_ledger=write_ledger)


def maintain_job(*, run_id: str = "adhoc", dry_run: bool = False, airflow: AirflowIds | dict | None = None,
                 write_ledger: bool = True, spec_path: str = "") -> JobRequest:
    return JobRequest(kind="maintain", spec_path=spec_path, run_id=run_id, airflow=airflow, write_ledger=write_ledger,
                      run=RunRequest(mode="dry_run" if dry_run else "incremental", trigger="available_now",
                                     dry_run=dry_run))


# --- what a job reports ----------------------------------------------------------------------------------------

class Summary(BaseModel):
    """The keys every job's summary has. Optional keys a job did not set are left out of the JSON, as ever."""

    model_config = ConfigDict(extra="forbid")

    pipeline: str
    run_id: str
    mode: str
    dry_run: bool
    status: Literal["running", "succeeded", "failed"]
    started_at: str
    ended_at: str | None = None
    duration_s: float | None = None
    sink: str
    checkpoint: str
    delta_version_before: int | None = None
    delta_version_after: int | None = None
    airflow: AirflowIds | None = None
    refused: bool = False
    error: str | None = None
    phases_s: dict[str, float] = {}
    """Seconds by phase (``session``, ``prepare``, ``query``, ``report``, ``ledger``, ``spark_submit``, ...)."""
    ledger: str | None = None
    ledger_error: str | None = None
    ledger_pending: str | None = None
    """The spool file holding the row that could not be appended (``ledger_error`` says why): the next run that
    appends to the ledger records it, marked ``recorded_late``."""
    shared_driver: dict[str, Any] | None = None
    """A job of a group (``sluice run A B ...``: one driver runs them in turn): the Spark application's id,
    how many jobs it ran, and this job's place among them (from 1)."""
    _keys: list[str] = PrivateAttr(default_factory=list)
    """The keys in the order the driver wrote them (the Airflow UI shows an XCom value's first keys)."""

    def __init__(self, **fields: Any) -> None:
        super().__init__(**fields)
        self._keys = list(fields)

    def __setattr__(self, name: str, value: Any) -> None:
        super().__setattr__(name, value)
        if name in type(self).model_fields and name not in self._keys:
            self._keys.append(name)

    def update(self, **fields: Any) -> None:
        """Set several keys at once (in this order, for the keys new to the summary)."""
        for name, value in fields.items():
            setattr(self, name, value)

    @property
    def succeeded(self) -> bool:
        return self.status == "succeeded"

    def to_json(self) -> dict[str, Any]:
        """The summary as JSON values (what XCom, the summary file and ``sluice run``'s last line carry), its
        keys in the driver's order."""
        data = self.model_dump(mode="json", exclude_unset=True)
        order = [k for k in self._keys if k in data] + [k for k in data if k not in self._keys]
        return {key: data[key] for key in order}

    def note_phase(self, name: str, seconds: float) -> None:
        self.phases_s[name] = round(seconds, 3)
        self.__pydantic_fields_set__.add("phases_s")

    @classmethod
    def read(cls, path: str | Path) -> Summary | None:
        """The summary a driver wrote, or None if it wrote none (it died before the end)."""
        path = Path(path)
        if not path.is_file():
            return None
        data = json.loads(path.read_text(encoding="utf-8"))
        model = MaintenanceSummary if data.get("mode") == "maintenance" else RunSummary
        summary = model.model_validate(data)
        summary._keys = list(data)
        return summary


class SourceReport(BaseModel):
    model_config = ConfigDict(extra="forbid")

    description: str | None = None
    start_offset: Any = None
    """JSON: a file source's ``{"logOffset": n}``, Kafka's ``{topic: {partition: offset}}``, a Delta source's."""
    end_offset: Any = None
    input_rows: int = 0
    files: list[str] | None = None


class BatchReport(BaseModel):
    """One micro-batch of a run: its offsets and files, the Delta version it wrote, what it set aside."""

    model_config = ConfigDict(extra="forbid")

    batch_id: int
    input_rows: int = 0
    delta_version: int | None = None
    """The version this batch committed; None when it committed nothing in this run (see replay_of_version)."""
    output_rows: int = 0
    merge: dict[str, Any] | None = None
    replay_of_version: int | None = None
    """A batch re-run after a crash that Delta had committed already, in this version, and skipped."""
    bad_records: int = 0
    quarantined_rows: int = 0
    dropped_rows: int = 0
    rescued_rows: int = 0
    expectations: dict[str, Any] | None = None
    added_columns: list[str] | None = None
    duration_ms: dict[str, Any] = {}
    watermark: str | None = None
    sources: list[SourceReport] = []


class ReingestReport(BaseModel):
    """The companion query of ``source.on_overwrite: reingest``: the new versions of rewritten files."""

    model_config = ConfigDict(extra="forbid")

    batches: int = 0
    input_rows: int = 0
    output_rows: int = 0
    micro_batches: list[BatchReport] = []
    skipped_batches: list[int] = []


class RunSummary(Summary):
    """What one run did: the JSON summary of ``sluice run``, the task's XCom value, the ledger's row."""

    trigger: str
    checkpoint_id: str | None = None
    batches: int = 0
    input_rows: int = 0
    output_rows: int = 0
    micro_batches: list[BatchReport] = []
    skipped_batches: list[int] = []
    bad_records: int = 0
    quarantined_rows: int = 0
    dropped_rows: int = 0
    rescued_rows: int = 0
    expectations: dict[str, dict[str, Any]] = {}
    quarantine: str
    # set by the runs that have them
    backfill: dict[str, Any] | None = None
    upstream_changes: dict[str, Any] | None = None
    replaced_checkpoint: str | None = None
    schema_change: dict[str, Any] | None = None
    promoted_rescued: dict[str, dict[str, Any]] | None = None
    added_columns: list[str] | None = None
    bad_records_query: dict[str, Any] | None = None
    overwritten_files: dict[str, Any] | None = None
    reingest: ReingestReport | None = None
    schema_version: int | None = None
    """A file source without ``source.schema``: the stored version of its schema the run read with
    (``schemas/<n>`` in the checkpoint; :mod:`sluice.schema.stored`). None: the spec declares it."""
    schema_inferred: dict[str, Any] | None = None
    """The first run of such a source: the schema it inferred (``version``, ``ddl``, ``files``) and whether it
    was ``stored`` (a dry run shows it and stores nothing)."""
    schema_versions_added: list[int] | None = None
    """``schema_evolution: add_columns``: the versions of the stored schema this run wrote (new columns)."""
    cleaned_files: dict[str, Any] | None = None
    """``source.clean_source``: the landing files this run archived or deleted (``count``, the first 10
    ``paths``), how many wait for their retention (``waiting``) or were left (``skipped``, with why)."""
    discovery: dict[str, Any] | None = None
    """A file source with ``source.discovery: index``: what its discovery cost — ``files_indexed`` (every
    file the checkpoint's index holds), ``new_files`` (found by this run), ``listings`` and ``listing_ms``,
    ``list_requests`` (on a local disk the folders read; in a bucket the LIST requests S3A counted),
    ``restore_ms`` (reading the index at the start), ``restored_from_log`` (files read from the text
    batch lists after the index's last snapshot) and ``batch_lists_read`` (file lists read back from the log
    to plan a batch: a batch listed in the same run is planned from memory, and the batch a restart asks for
    again is not read)."""
    catalog: dict[str, Any] | None = None
    """The pipeline's tables have names (``sink.table``): where they are registered (``uri``), the sink's
    ``table`` and ``action`` (``created``, ``unchanged``: nothing written, ``moved``: to a new folder), the
    ``quarantine`` table's when it exists; ``error`` when the catalog refused or did not answer (the data is
    committed: the next run registers)."""
    driver_jit: dict[str, Any] | None = None
    """The driver's JIT (``SLUICE_DRIVER_JIT``): ``mode`` (auto, full, quick), ``optimizing_compiler`` (held: C2
    never ran, the run was small; released, ``released_because`` says why; on; off) (spark_jobs.driver.jit)."""
    backlog_before: dict[str, Any] | None = None
    """What waited for the pipeline when the run began (:mod:`sluice.operations.backlog`); a dry run's prediction.
    With ``source.discovery: index``, what the query's first listing found new (the same files: those its index
    does not hold), and ``backlog_after`` one more listing against that index."""
    backlog_after: dict[str, Any] | None = None
    """What waited when it ended: what arrived during the run (a real run only)."""
    idle_run: dict[str, Any] | None = None
    """A run the launcher proved had nothing to do, so it started no driver (``SLUICE_IDLE_RUNS=skip``,
    :mod:`sluice.operations.idle`): ``driver_started`` (false), ``why`` (what proves it idle),
    ``checked_in_s``, and what was looked at (``files_listed``, ``files_known``; ``partitions``;
    ``upstream_version``). Absent from a run that started its driver."""
    orphan_files: dict[str, Any] | None = None
    """A failed run: the data files it left in its tables that no commit names (a full disk, a failed write):
    ``count``, ``bytes``, the ``paths`` (the first 100), per table role in ``tables``. Nothing reads them; the
    next maintenance run (``sluice maintain``, the maintenance DAG) deletes them."""

    def headline(self) -> str:
        return (f"{self.batches} batches, {self.input_rows} rows in, {self.output_rows} rows out, Delta version "
                f"{self.delta_version_before} -> {self.delta_version_after}")


def refused_summary(job: JobRequest, *, pipeline: str, sink: str, checkpoint: str, quarantine: str, error: str,
                    started: float) -> Summary:
    """The summary of a job refused before its driver started (the launcher's lock held by another run, an object
    store that does not answer): ``status: failed``, ``refused: true``, the ``error`` (``refused: ...``, as a
    driver's own refusals read), no batch -- recorded in the ledger like any run (docs/run-summary.md)."""
    ended = time.time()
    common = dict(pipeline=pipeline, run_id=job.run_id, mode=job.mode, dry_run=job.dry_run, status="failed",
                  started_at=iso(started), ended_at=iso(ended), duration_s=round(ended - started, 3), sink=sink,
                  checkpoint=checkpoint, airflow=job.airflow, refused=True, error=f"refused: {error}")
    if job.kind == "run":
        return RunSummary(**{**common, "trigger": job.trigger}, quarantine=quarantine, batches=0, input_rows=0,
                          output_rows=0)
    return MaintenanceSummary(**common, optimize=False)


def idle_summary(job: JobRequest, *, pipeline: str, sink: str, checkpoint: str, quarantine: str, started: float,
                 why: str, backlog: dict[str, Any] | None, facts: dict[str, Any], checked_in_s: float) -> RunSummary:
    """The summary of a run the launcher found idle (:mod:`sluice.operations.idle`): ``status: succeeded``, no
    batch, the table's version before and after the same, the backlog it measured before and after (the same
    listing), ``idle_run`` saying why -- recorded in the ledger like any run (docs/run-summary.md)."""
    ended = time.time()
    facts = dict(facts)
    version = facts.pop("delta_version", None)
    checkpoint_id = facts.pop("checkpoint_id", None)
    facts.pop("batch", None)
    return RunSummary(
        pipeline=pipeline, run_id=job.run_id, mode=job.mode, trigger=job.trigger, dry_run=False, status="succeeded",
        started_at=iso(started), sink=sink, checkpoint=checkpoint, checkpoint_id=checkpoint_id, batches=0,
        input_rows=0, output_rows=0, delta_version_before=version, delta_version_after=version,
        micro_batches=[], skipped_batches=[], bad_records=0, quarantined_rows=0, dropped_rows=0, rescued_rows=0,
        expectations={}, quarantine=quarantine, airflow=job.airflow, refused=False, error=None,
        phases_s={"idle_check": checked_in_s}, backlog_before=backlog, backlog_after=backlog,
        idle_run={"driver_started": False, "why": why, "checked_in_s": checked_in_s, **facts},
        ended_at=iso(ended), duration_s=round(ended - started, 3),
    )


class MaintenanceSummary(Summary):
    """What one maintenance job did: OPTIMIZE and VACUUM, per table."""

    optimize: bool
    zorder_by: list[str] = []
    vacuum_retention_hours: int | float | None = None
    files_compacted: int = 0
    files_written: int = 0
    files_removed: int = 0
    bytes_removed: int = 0
    tables: dict[str, Any] = {}
    checkpoint_size: dict[str, Any] | None = None
    orphans_removed: dict[str, Any] | None = None
    """Data files no commit named (left by failed runs), deleted from the tables before OPTIMIZE: ``files``,
    ``bytes`` (a dry run: what it would delete)."""
    note: str | None = None

    def headline(self) -> str:
        return (f"OPTIMIZE compacted {self.files_compacted} files into {self.files_written}, VACUUM removed "
                f"{self.files_removed} files ({self.bytes_removed} bytes)")
