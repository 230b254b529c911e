"""The driver shell of every sluice spark-submit: read the request, run the job's body, write the summary.

    spark-submit ... spark_jobs/run_pipeline.py --request REQUEST.json     (a run: spark_jobs.run.runner)
    spark-submit ... spark_jobs/maintain.py --request REQUEST.json         (maintenance: spark_jobs.run.maintenance)
    spark-submit ... spark_jobs/run_pipeline.py --request A.json --request B.json ...   (a group: one driver)

The request file is a :class:`sluice.contract.JobRequest` written by the launcher (``sluice run``, the
Airflow task). The JSON summary is the LAST line of stdout, and is written to the request's ``summary_file``,
which is how the launcher reads it back. Exit code 0 = succeeded, 1 = the job failed, 2 = a bad request or spec.

:class:`JobRecord` is the one place a job's summary gets its common keys, the pipeline's driver lock, its
timestamps and status, and its ledger row: runs and maintenance are two bodies inside it.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sluice.contract import JobRequest, MaintenanceSummary, RunSummary, Summary, iso
from sluice.operations.ledger import record_run
from sluice.operations.ledger_spool import ensure_reserve
from sluice.settings import Settings, load_settings
from sluice.spec import PipelineSpec, SpecError, load_spec
from sluice.storage.lock import PipelineBusy, driver_lock
from spark_jobs.driver.errors import describe_error
from spark_jobs.driver.start import SessionStart, start_session


class JobFailed(RuntimeError):
    """The job failed; ``summary`` holds what was known, with ``status: failed`` and the ``error``."""

    def __init__(self, summary: Summary):
        self.summary = summary
        super().__init__(summary.error)


class JobRecord:
    """The common part of one job's summary, and what surrounds its body::

        record = JobRecord(spec, settings, job, sink=..., **the job's own keys)
        record.run(body)        # under the driver lock (not for a dry run); a refusal becomes the error
        summary = record.close(RunFailed)   # ended_at, duration, status, the ledger row; raises on error

    ``record.summary`` is the job's :class:`~sluice.contract.RunSummary` (or ``MaintenanceSummary``), which
    the body fills; its keys keep the order in which they were first set.
    """

    def __init__(self, spec: PipelineSpec, settings: Settings, job: JobRequest, **fields: Any) -> None:
        self.spec, self.settings, self.job = spec, settings, job
        self.started = time.time()
        if job.write_ledger and not job.dry_run:
            # room for this job's ledger row should the disk fill while it runs (a stat when it is there)
            ensure_reserve(settings.ledger_spool)
        model = RunSummary if job.kind == "run" else MaintenanceSummary
        self.summary: Summary = model(
            pipeline=spec.name,
            run_id=job.run_id,
            mode=job.mode,
            **({"trigger": job.trigger} if job.kind == "run" else {}),
            dry_run=job.dry_run,
            status="running",
            started_at=iso(self.started),
            **fields,
            airflow=job.airflow,
            refused=False,
            error=None,
            phases_s={},
        )

    def run(self, body: Callable[[], None], refusals: tuple[type[BaseException], ...] = ()) -> None:
        """Run ``body`` holding the pipeline's driver lock (a dry run takes none). The lock held by another
        job, or one of ``refusals`` raised by the body, becomes the summary's error (``refused: ...``)."""
        lock = None
        try:
            if not self.job.dry_run:
                lock = driver_lock(self.settings.checkpoint_root, self.spec.identity, self.job.holder(),
                                   lease_seconds=self.settings.lock_lease_seconds).acquire()
            body()
        except (PipelineBusy, *refusals) as refused:
            self.summary.error, self.summary.refused = f"refused: {refused}", True
        except Exception as err:  # noqa: BLE001 - the summary is written all the same, with what failed
            # an error the body did not report itself, or one met while reporting an earlier one (an object
            # store that stopped answering fails the commit, then the reading of the table's version): the
            # first error is the cause, and stays the summary's
            traceback.print_exc()  # the whole story for whoever reads the Spark output
            if self.summary.error is None:
                self.summary.error = describe_error(err)
        finally:
            if lock is not None:
                lock.release()

    def close(self, failed: type[JobFailed] = JobFailed) -> Summary:
        """End the summary, append it to the ledger; raise ``failed`` carrying it if the job failed."""
        summary = self.summary
        if summary.error and self.job.kind == "run" and not self.job.dry_run:
            self._name_orphans()
        ended = time.time()
        summary.ended_at = iso(ended)
        summary.duration_s = round(ended - self.started, 3)
        summary.status = "failed" if summary.error else "succeeded"
        if self.job.write_ledger:
            mark = time.monotonic()
            # the job's outcome stands whatever happens to its row: appended, or kept for the next append
            record_run(str(self.settings.ledger_path), summary, self.settings.ledger_spool,
                       lambda err: " ".join(str(err).split()))
            if summary.ledger:
                summary.note_phase("ledger", time.monotonic() - mark)
        if summary.error:
            raise failed(summary)
        return summary

    def _name_orphans(self) -> None:
        """A failed run: the data files it wrote that no commit names, per table (``orphan_files``)."""
        from sluice.storage.delta_log import unreferenced_files

        since = int((self.started - 2) * 1e9)  # file times are not finer than the file system's
        tables, count, size = {}, 0, 0
        for role in ("sink", "quarantine"):
            table = getattr(self.summary, role, None)
            try:
                found = unreferenced_files(table, since_ns=since) if table else []
            except Exception as err:  # noqa: BLE001 - the run's own error comes first; say what was not looked at
                tables[role] = {"table": table, "error": describe_error(err)}
                continue
            if found:
                tables[role] = {"table": table, "count": len(found), "bytes": sum(e.size for e in found),
                                "paths": [f"{table.rstrip('/')}/{e.name}" for e in found[:100]]}
                count, size = count + len(found), size + tables[role]["bytes"]
        if tables:
            self.summary.orphan_files = {"count": count, "bytes": size, "tables": tables,
                                         "removed_by": "the next maintenance run (sluice maintain)"}


Body = Callable[[Any, PipelineSpec, Settings, JobRequest], Summary]


def read_jobs(paths: list[Path]) -> list[tuple[JobRequest, PipelineSpec]] | None:
    """Each request file's job and its validated spec; None (the reason said on stderr) for a request that
    cannot be read or a spec that is not valid."""
    jobs: list[tuple[JobRequest, PipelineSpec]] = []
    for path in paths:
        try:
            job = JobRequest.read(path)
        except (OSError, ValueError) as err:
            print(f"sluice: cannot read the job request {path}: {err}", file=sys.stderr)
            return None
        try:
            jobs.append((job, load_spec(job.spec_path)))
        except SpecError as err:
            print(f"sluice: invalid spec\n{err}", file=sys.stderr)
            return None
    return jobs


def main(argv: list[str], body: Body, *, what: str = "run", session: SessionStart | None = None) -> int:
    """The driver: read the request(s), take the session (``session``: started by the entry point beside the
    imports, :mod:`spark_jobs.driver.start`; else started here), run ``body`` for each, write and print each
    summary.

    Several ``--request`` files make a group: one JVM and one SparkContext run the jobs one after another,
    each with its own spec, lock, checkpoint, table, ledger row and summary (a job that fails fails alone);
    the exit code is 1 if any failed. Each job of a group has a SparkSession of its own (``newSession``: its
    own SQL settings, temporary views, functions) over the one SparkContext. A bad request or spec stops the
    driver before any job starts."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--request", required=True, type=Path, action="append",
                        help="a job's request file (JSON); given several times, one driver runs them in turn")
    jobs = None
    try:
        jobs = read_jobs(parser.parse_args(argv).request)
    finally:
        if jobs is None and session is not None:  # bad arguments, a bad request or spec: no job runs
            session.discard()
    if jobs is None:
        return 2

    from spark_jobs.driver.session import local_file_system

    watch_launcher()
    if session is None:  # a bad request or spec fails before the SparkContext starts
        session = start_session()
    spark = local_file_system(session.wait())
    spark.sparkContext.setLogLevel("WARN")
    session_s = session.seconds
    code = 0
    try:
        for position, (job, spec) in enumerate(jobs):
            shared = ({"driver": "group", "app_id": spark.sparkContext.applicationId, "jobs": len(jobs),
                       "position": position + 1} if len(jobs) > 1 else None)
            code = max(code, run_one(spark, job, spec, body, what, session_s=session_s if position == 0 else 0.0,
                                     shared=shared))
    finally:
        spark.stop()
    return code


def run_one(spark: Any, job: JobRequest, spec: PipelineSpec, body: Body, what: str, *, session_s: float,
            shared: dict[str, Any] | None) -> int:
    """One job in this driver: its body, its summary written (:func:`_write`). 0 if it succeeded, 1 if it failed.

    A job of a shared driver (``shared``: the summary's ``shared_driver``) gets a session of its own over the
    shared JVM and SparkContext: its own SQL settings, temporary views (a transform's lookup tables), functions
    and query listeners, as in a driver of its own. ``session_s``: the JVM's and SparkSession's start, paid
    before this job began (not in its ``duration_s``; 0 for a driver's later jobs)."""
    session = spark.newSession() if shared is not None else spark
    code = 0
    try:
        summary = body(session, spec, load_settings(), job)
    except JobFailed as failed:
        summary, code = failed.summary, 1
        print(f"sluice: {what} of {spec.name} failed: {summary.error}", file=sys.stderr)
    summary.note_phase("session", session_s)
    if shared is not None:
        summary.shared_driver = shared
    _write(job, summary)
    return code


def _write(job: JobRequest, summary: Summary) -> None:
    """The summary to the request's summary file (how the launcher reads it back) and as a line of stdout."""
    text = json.dumps(summary.to_json())
    if job.summary_file:
        Path(job.summary_file).parent.mkdir(parents=True, exist_ok=True)
        Path(job.summary_file).write_text(text, encoding="utf-8")
    print(text, flush=True)


def watch_launcher() -> None:
    """End this job when the process that launched it (``sluice run``, the Airflow task) is gone.

    Killing the launcher (kill -9 of the Airflow task, a worker lost) does not kill spark-submit: the run
    would go on writing beside the retry. The launcher passes its pid and start time; if that process
    disappears, this driver kills its JVM (its parent, spark-submit) and itself.
    """
    from sluice.process import LAUNCHER_ENV, launcher_alive

    value = os.environ.get(LAUNCHER_ENV)
    if not value:
        return

    def watch() -> None:
        while launcher_alive(value):
            time.sleep(1)
        print(f"sluice: the launcher of this run ({value}) is gone: stopping the run", file=sys.stderr, flush=True)
        os.kill(os.getppid(), signal.SIGKILL)
        os._exit(137)

    threading.Thread(target=watch, name="sluice-launcher-watch", daemon=True).start()
