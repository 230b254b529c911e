"""Launch one job and get its summary back, written once for ``sluice run``/``maintain`` and the Airflow task.

    with tempfile.TemporaryDirectory() as workdir:
        plan = build_plan(job, spec, settings, workdir=Path(workdir))
        summary = launch(plan, lock, submit)          # raises JobFailed

``lock`` is the pipeline's lock (:func:`lock_for`), held from before spark-submit to its end; ``submit``
runs the plan's spark-submit and raises if it failed (the provider's ``SparkSubmitHook``, or a plain
subprocess when the Spark master is known without Airflow). Each caller turns :class:`JobFailed` into its
own failure: a failed Airflow task, or ``sluice run``'s exit code 1 with the summary on stdout.

Imports neither Airflow nor PySpark.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sluice.contract import JobRequest, Summary, idle_summary, refused_summary
from sluice.launch.submit import SubmitPlan, spark_submit_command
from sluice.process import kill_tree
from sluice.settings import Settings
from sluice.storage.lock import PipelineBusy, maintenance_lock, run_lock
from sluice.storage.object_store import ObjectStoreError, check_reachable


class JobFailed(RuntimeError):
    """The job failed, was refused, or wrote no summary. ``summary``: what the driver reported, if it did;
    ``cause``: spark-submit's own failure, if that is how it failed."""

    def __init__(self, message: str, summary: Summary | None = None, cause: BaseException | None = None,
                 refused_here: bool = False):
        super().__init__(message)
        self.summary = summary
        self.cause = cause
        self.refused_here = refused_here
        """Refused by the launcher, before any driver: no Spark output said why, the caller does."""


def lock_for(job: JobRequest, pipeline: str, settings: Settings, *, wait_seconds: float = 0):
    """The lock a launcher holds around a job's spark-submit (:mod:`sluice.storage.lock`): none for a dry run (it
    changes neither checkpoint nor table); a run's, refused at once if the pipeline is busy (a backfill waits
    for it); maintenance's, waited for up to ``wait_seconds`` (a running run finishes first)."""
    if job.dry_run:
        return contextlib.nullcontext()
    root, lease = settings.checkpoint_root, settings.lock_lease_seconds
    if job.kind == "maintain":
        return maintenance_lock(root, pipeline, job.holder(), wait_seconds, lease_seconds=lease)
    return run_lock(root, pipeline, job.holder(), dry_run=False, backfill=job.backfill is not None,
                    lease_seconds=lease)


def launch(plan: SubmitPlan, lock: Any, submit: Callable[[SubmitPlan], None]) -> Summary:
    """Hold ``lock``, run ``submit(plan)``, read the summary the driver wrote. Returns the summary of a job
    that succeeded, with its ``phases_s.spark_submit`` (the whole spark-submit, seen from here)."""
    what, name = plan.what, plan.pipeline
    requested = time.time()
    try:
        check_reachable(plan.object_store_uris)  # a missing bucket, wrong credentials: said before anything starts
        with lock:
            idle = idle_run(plan, requested)
            if idle is not None:
                return idle
            started = time.monotonic()
            try:
                submit(plan)
            except Exception as err:  # noqa: BLE001 - the driver's summary says what failed, when it wrote one
                summary = plan.read_summary()
                if summary is not None and summary.error:
                    summary.note_phase("spark_submit", time.monotonic() - started)
                    raise JobFailed(f"{what} of {name} failed: {summary.error}", summary, err) from err
                raise JobFailed(f"spark-submit failed before the {what} summary was written: {err}", summary,
                                err) from err
    except (PipelineBusy, ObjectStoreError) as refused:
        raise JobFailed(str(refused), record_refusal(plan, str(refused), requested), refused_here=True) from None
    summary = plan.read_summary()
    if summary is None:
        raise JobFailed(f"{what} of {name} wrote no {'run ' if what == 'run' else ''}summary; see the Spark output "
                        "above")
    summary.note_phase("spark_submit", time.monotonic() - started)
    if not summary.succeeded:
        raise JobFailed(f"{what} of {name} failed: {summary.error}", summary)
    return summary


def launch_group(plans: list[SubmitPlan], locks: list[Any], submit: Callable[[SubmitPlan], None]) -> list[
        Summary | JobFailed]:
    """Several jobs in one driver (:func:`sluice.launch.submit.group_plan`): each job's lock is taken first (a
    busy pipeline is refused alone, as :func:`launch` refuses it), the jobs that hold theirs run in one
    spark-submit, and each one's outcome comes back in the order given: its summary, or the :class:`JobFailed`
    that :func:`launch` would have raised for it."""
    from sluice.launch.submit import group_plan

    requested = time.time()
    outcomes: dict[int, Summary | JobFailed] = {}
    with contextlib.ExitStack() as held:
        going = []
        for n, (plan, lock) in enumerate(zip(plans, locks, strict=True)):
            try:
                check_reachable(plan.object_store_uris)
                held.enter_context(lock)
                going.append(n)
            except (PipelineBusy, ObjectStoreError) as refused:
                outcomes[n] = JobFailed(str(refused), record_refusal(plan, str(refused), requested),
                                        refused_here=True)
        for n in list(going):
            idle = idle_run(plans[n], requested)
            if idle is not None:
                outcomes[n] = idle
                going.remove(n)
        started = time.monotonic()
        failure: BaseException | None = None
        if going:
            try:
                submit(group_plan([plans[n] for n in going]))
            except Exception as err:  # noqa: BLE001 - each job's summary says whether it failed
                failure = err
        for n in going:
            plan = plans[n]
            summary = plan.read_summary()
            if summary is None:
                outcomes[n] = JobFailed(f"{plan.what} of {plan.pipeline} wrote no summary: the shared driver ended "
                                        f"before it ({failure or 'see the Spark output above'})", None, failure)
                continue
            summary.note_phase("spark_submit", time.monotonic() - started)
            outcomes[n] = (summary if summary.succeeded
                           else JobFailed(f"{plan.what} of {plan.pipeline} failed: {summary.error}", summary, failure))
    return [outcomes[n] for n in range(len(plans))]


def idle_run(plan: SubmitPlan, started: float) -> Summary | None:
    """The summary of a run its check proved idle (:mod:`sluice.operations.idle`), its ledger row appended as
    every run's is; None when the driver must run (the check said no, or the plan has none)."""
    if plan.idle_check is None or plan.job is None or not plan.places:
        return None
    verdict = plan.idle_check()
    if not verdict.idle:
        return None
    places = plan.places
    backlog = {**(verdict.backlog or {}), "measured_in_s": verdict.seconds}
    summary = idle_summary(plan.job, pipeline=plan.pipeline, sink=places["sink"], checkpoint=places["checkpoint"],
                           quarantine=places["quarantine"], started=started, why=verdict.why, backlog=backlog,
                           facts=verdict.facts, checked_in_s=verdict.seconds)
    if plan.job.write_ledger:
        from sluice.operations.ledger import record_run

        mark = time.monotonic()
        record_run(places["ledger"], summary, Path(places["spool"]) if places.get("spool") else None)
        summary.note_phase("ledger", time.monotonic() - mark)
    return summary


def record_refusal(plan: SubmitPlan, error: str, started: float) -> Summary | None:
    """The summary of a job the launcher refused, its row appended to the ledger as every run's is (unless the
    job writes none); None for a plan that does not say where its job writes (built by hand)."""
    if plan.job is None or not plan.places:
        return None
    places = plan.places
    summary = refused_summary(plan.job, pipeline=plan.pipeline, sink=places["sink"], checkpoint=places["checkpoint"],
                              quarantine=places["quarantine"], error=error, started=started)
    if plan.job.write_ledger:
        from sluice.operations.ledger import record_run

        # the refusal stands; its row is appended, or kept for the next append (a store that is down)
        record_run(places["ledger"], summary, Path(places["spool"]) if places.get("spool") else None)
    return summary


def subprocess_submit(master: str) -> Callable[[SubmitPlan], None]:
    """Run the plan's spark-submit as a child process (its output to stderr), against ``master``, without
    Airflow. SIGTERM/SIGINT stop the whole spark-submit process tree first."""

    def submit(plan: SubmitPlan) -> None:
        cmd = spark_submit_command(plan, master)
        print("Spark-Submit cmd: " + " ".join(cmd), file=sys.stderr, flush=True)  # as the hook logs it
        proc = subprocess.Popen(cmd, stdout=sys.stderr, env={**os.environ, **plan.env_vars})

        def stop(signum, _frame):
            kill_tree(proc.pid)
            raise SystemExit(128 + signum)

        previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGTERM, signal.SIGINT)}
        try:
            code = proc.wait()
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        if code != 0:
            raise SubmitFailed(f"spark-submit exited with code {code}")

    return submit


class SubmitFailed(RuntimeError):
    """spark-submit exited with an error."""


@contextlib.contextmanager
def stdout_to_stderr():
    """Send everything written to stdout to stderr, at the file-descriptor level, so that stdout carries
    nothing but the summary (Airflow's structlog writes the hook's lines to stdout)."""
    sys.stdout.flush()
    saved = os.dup(1)
    os.dup2(2, 1)
    try:
        yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)
