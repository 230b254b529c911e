"""SluicePipelineOperator: runs one sluice job (a pipeline's run, or its maintenance) through the provider's
SparkSubmitHook."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from airflow.sdk import BaseOperator
from airflow.sdk.exceptions import AirflowException, AirflowFailException

from sluice.contract import JobKind, JobRequest, RunSummary, maintain_job
from sluice.contract.quality import quality_warnings
from sluice.contract.request import RunRequestError, run_request
from sluice.launch.launcher import JobFailed, launch, lock_for
from sluice.launch.submit import APPLICATIONS, application, build_plan
from sluice.settings import load_settings
from sluice.spec import load_spec
from sluice_airflow.aws_connection import use_aws_connection
from sluice_airflow.hook import SluiceSubmitHook
from sluice_airflow.kafka_connection import kafka_secret_env
from sluice_airflow.spark_connection import require_spark_connection


class SluiceRunFailed(AirflowException):
    """The pipeline's query failed; the message is the Spark job's error."""


def is_dry_run() -> bool:
    """``airflow tasks test`` sets AIRFLOW_TEST_MODE: such runs must not advance the real checkpoint."""
    return os.environ.get("AIRFLOW_TEST_MODE", "").lower() == "true"


class InvalidRunRequest(AirflowFailException):
    """The run's params do not fit together or the spec; failed at once, without retries."""


def backfill_interval(context: Any):
    """The data interval of an Airflow backfill run (``airflow backfill create``, the UI's backfill
    dialog): the slice it rebuilds. None for any other run."""
    dag_run = context.get("dag_run")
    run_type = getattr(getattr(dag_run, "run_type", None), "value", getattr(dag_run, "run_type", None))
    if run_type != "backfill":
        return None
    start, end = context.get("data_interval_start"), context.get("data_interval_end")
    if start is None or end is None:
        raise InvalidRunRequest("this backfill run has no data interval: give the DAG a schedule (e.g. @daily)")
    return start, end


def table_changed(summary: RunSummary) -> bool:
    """Whether the run committed anything to the sink table (a dry run never does)."""
    if summary.dry_run:
        return False
    before, after = summary.delta_version_before, summary.delta_version_after
    follow = summary.upstream_changes or {}
    # an upstream correction rebuilt here (slices, or the whole table) changes rows the pipelines below read
    rebuilt = any(r.get("written") for r in follow.get("rebuilds") or []) or follow.get("action") == "reset"
    return after is not None and after != before and bool(
        summary.output_rows or summary.mode != "incremental" or rebuilt)


def event_extra(summary: RunSummary) -> dict[str, Any]:
    """What the table's Asset event says: the facts of the change, so a downstream DAG (or a person in the
    Assets view) sees what changed without reading logs -- the run, the Delta versions it wrote (``[first,
    last]``), the rows written and set aside -- and of a correction: the backfill's slice, or the slices
    rebuilt here after an upstream one (which the runs it starts rebuild in turn, read from the table's log)."""
    before, after = summary.delta_version_before, summary.delta_version_after
    extra: dict[str, Any] = {
        "run_id": summary.run_id,
        "delta_version": after,
        "delta_versions": [0 if before is None else before + 1, after] if after is not None else None,
        "rows": summary.output_rows,
        "quarantined_rows": summary.quarantined_rows,
    }
    if summary.airflow:
        extra["dag_run_id"] = summary.airflow.dag_run_id
    if summary.backfill:
        extra["backfill"] = summary.backfill.get("slice")
    follow = summary.upstream_changes or {}
    rebuilt = [r["slice"] for r in follow.get("rebuilds") or [] if r.get("written")]
    if rebuilt:
        extra["rebuilt"] = rebuilt
    if follow.get("action") == "reset":
        extra["rebuilt"] = "all"
    return extra


class SluicePipelineOperator(BaseOperator):
    """Run the pipeline of ``spec_path`` once (one one-shot streaming query) and return its run summary; with
    ``kind="maintain"``, OPTIMIZE and VACUUM its tables instead and return the maintenance summary.

    The spark-submit comes from :func:`sluice.launch.submit.build_plan` and runs through
    :func:`sluice.launch.launcher.launch` with the provider's hook (:class:`SluiceSubmitHook`): the code path
    ``sluice run`` uses too. The summary is logged and returned (so it is the task's XCom value).

    :param spec_path: the pipeline's YAML spec (re-read at run time).
    :param kind: ``run`` (the default) or ``maintain``.
    :param trigger: override the spec's trigger (``available_now`` or ``once``).
    :param lock_wait_seconds: maintenance waits this long for a running run of the pipeline to finish.
    """

    template_fields: Sequence[str] = ("spec_path", "trigger")
    ui_color = "#9ad0f5"

    def __init__(self, *, spec_path: str, kind: JobKind = "run", trigger: str | None = None,
                 lock_wait_seconds: float = 1800, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if kind not in APPLICATIONS:
            raise ValueError(f"kind: {kind!r} is not allowed; use one of: {', '.join(APPLICATIONS)}")
        self.spec_path = spec_path
        self.kind = kind
        self.trigger = trigger
        self.lock_wait_seconds = lock_wait_seconds
        self.hook: SluiceSubmitHook | None = None
        self._ran: tuple[Any, Any] | None = None
        """(spec, summary or None) of the run this task made, for its OpenLineage events."""
        if kind == "maintain":
            self.ui_color = "#c9e3b5"

    @property
    def application(self) -> str:
        """The driver's entry point this task spark-submits."""
        return application(self.kind)

    def execute(self, context: Any) -> dict[str, Any]:
        settings = load_settings()
        use_aws_connection(settings.aws_conn_id)  # object storage credentials, when a connection holds them
        spec = load_spec(self.spec_path)
        ti = context["ti"]
        airflow = {"dag_id": ti.dag_id, "dag_run_id": context["run_id"], "try_number": ti.try_number}
        run_id = f"{context['run_id']}#{ti.try_number}"
        if self.kind == "maintain":
            job = maintain_job(spec_path=self.spec_path, run_id=run_id, dry_run=is_dry_run(), airflow=airflow)
        else:
            job = JobRequest(spec_path=self.spec_path, run_id=run_id, airflow=airflow,
                             run=self._run_request(spec, context))
        lock = lock_for(job, spec.identity, settings, wait_seconds=self.lock_wait_seconds)
        with tempfile.TemporaryDirectory(prefix=f"sluice-{'maintain' if self.kind == 'maintain' else 'run'}-") as tmp:
            plan = build_plan(job, spec, settings, workdir=Path(tmp),
                              secret_env=kafka_secret_env(spec) if self.kind == "run" else None)
            require_spark_connection(plan.conn_id)
            self.hook = SluiceSubmitHook(**plan.hook_kwargs())
            self._log_request(spec, job)
            self._ran = (spec, None)
            try:
                handed = self.hook.host_submit(settings) if settings.shared_driver == "host" else None
                summary = launch(plan, lock, handed or (lambda p: self.hook.submit(p.application)))
                self._ran = (spec, summary)
            except JobFailed as failed:
                self._ran = (spec, failed.summary)
                if failed.cause is not None and (failed.summary is None or not failed.summary.error):
                    raise failed.cause from None  # spark-submit's own failure, as the provider reports it
                raise SluiceRunFailed(str(failed)) from failed.cause
        return self._report(spec, job, summary, context)

    # --- OpenLineage (Airflow's provider calls these after the task; sluice_airflow.lineage) ---------------

    def get_openlineage_facets_on_complete(self, task_instance: Any):
        return self._lineage()

    def get_openlineage_facets_on_failure(self, task_instance: Any):
        return self._lineage()

    def _lineage(self):
        from sluice_airflow.lineage import operator_lineage

        if self._ran is None or self.kind != "run":
            from airflow.providers.openlineage.extractors import OperatorLineage

            return OperatorLineage()
        spec, summary = self._ran
        lineage = operator_lineage(spec, load_settings(), summary)
        if summary is not None and summary.dry_run:  # a dry run read its inputs and wrote nothing
            lineage.outputs = []
        return lineage

    def _run_request(self, spec, context: Any):
        params = context.get("params") or {}
        try:
            return run_request(
                spec, mode=params.get("mode"), trigger=self.trigger or params.get("trigger"),
                max_files_per_trigger=params.get("max_files_per_trigger"),
                max_offsets_per_trigger=params.get("max_offsets_per_trigger"),
                backfill_from=params.get("backfill_from"), backfill_to=params.get("backfill_to"),
                test_mode=is_dry_run(), backfill_interval=backfill_interval(context),
            )
        except RunRequestError as err:
            raise InvalidRunRequest(f"{spec.name}: {err}") from None

    def _log_request(self, spec, job: JobRequest) -> None:
        if job.kind == "maintain":
            return
        if job.backfill is not None:
            self.log.info("backfill of %s: rebuilds the rows with %s in %s; the checkpoint is not touched",
                          spec.name, spec.backfill.column, job.backfill.label)
        if job.dry_run:
            self.log.info("dry run (%s): checkpoint and table are not touched",
                          "AIRFLOW_TEST_MODE is set" if is_dry_run() else "mode=dry_run")
        if job.reset:
            self.log.warning("mode=reset: a new checkpoint; the table's content is replaced from the source")

    def _report(self, spec, job: JobRequest, summary, context: Any) -> dict[str, Any]:
        """Log the summary, decide the Asset event; the summary's JSON is the task's XCom value."""
        data = summary.to_json()
        if job.kind == "maintain":
            self.log.info("sluice maintenance of %s%s: %s", spec.name,
                          " (dry run: nothing changed)" if job.dry_run else "", summary.headline())
            if summary.note:
                self.log.info("%s", summary.note)
            self.log.info("maintenance summary: %s", json.dumps(data))
            return data
        self.log.info("sluice %s%s: %s", spec.name, " (dry run)" if job.dry_run else "", summary.headline())
        for warning in quality_warnings(summary):
            self.log.warning("%s", warning)
        if self.outlets and not table_changed(summary):
            # the sink table's Asset is this task's outlet: a run that changed nothing must not wake the
            # pipelines scheduled on it (Airflow emits an event for every outlet of a successful task)
            self.log.info("no new rows in the table: no Asset event for %s", ", ".join(a.name for a in self.outlets))
            self.outlets = []
        elif self.outlets:
            for asset in self.outlets:
                context["outlet_events"][asset].extra = event_extra(summary)
        if summary.ledger_error:
            self.log.warning("%s", summary.ledger_error)
        self.log.info("run summary: %s", json.dumps(data))
        return data

    def on_kill(self) -> None:
        """Kill the whole spark-submit process tree (:class:`SluiceSubmitHook`)."""
        if self.hook is not None:
            self.hook.on_kill()


class SluiceMaintenanceOperator(SluicePipelineOperator):
    """``SluicePipelineOperator(kind="maintain")``: OPTIMIZE and VACUUM the tables of the pipeline of
    ``spec_path`` (``spark_jobs/maintain.py``) and return the maintenance summary (files compacted, bytes
    removed) as the task's XCom value.

    Holds the pipeline's lock like a run, but waits up to ``lock_wait_seconds`` for a running run to finish
    instead of failing. Under ``airflow tasks test`` it is a dry run (VACUUM DRY RUN; nothing changes).
    """

    def __init__(self, *, spec_path: str, lock_wait_seconds: float = 1800, **kwargs: Any) -> None:
        super().__init__(spec_path=spec_path, kind="maintain", lock_wait_seconds=lock_wait_seconds, **kwargs)
