"""SluicePipelineOperator: runs one sluice pipeline through the provider's SparkSubmitOperator."""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.sdk.exceptions import AirflowException, AirflowFailException

from sluice.lock import PipelineBusy, maintenance_lock, run_lock
from sluice.process import kill_tree
from sluice.quality import quality_warnings
from sluice.run_request import RunRequestError, run_request
from sluice.settings import load_settings
from sluice.spec import load_spec
from sluice.submit import build_maintenance_plan, build_submit_plan, spark_jobs_dir
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


def table_changed(summary: dict[str, Any]) -> bool:
    """Whether the run committed anything to the sink table (a dry run never does)."""
    if summary.get("dry_run"):
        return False
    before, after = summary.get("delta_version_before"), summary.get("delta_version_after")
    follow = summary.get("upstream_changes") or {}
    # an upstream correction rebuilt here (slices, or the whole table) changes rows the pipelines below read
    rebuilt = any(r.get("written") for r in follow.get("rebuilds") or []) or follow.get("action") == "reset"
    return after is not None and after != before and bool(
        summary.get("output_rows") or summary.get("mode") != "incremental" or rebuilt)


def event_extra(summary: dict[str, Any]) -> dict[str, Any]:
    """What the table's Asset event says of a correction: the backfill's slice, or the slices rebuilt here
    after an upstream one (which the runs it starts rebuild in turn, read from the table's log)."""
    extra: dict[str, Any] = {}
    if summary.get("backfill"):
        extra["backfill"] = summary["backfill"].get("slice")
    follow = summary.get("upstream_changes") or {}
    rebuilt = [r["slice"] for r in follow.get("rebuilds") or [] if r.get("written")]
    if rebuilt:
        extra["rebuilt"] = rebuilt
    if follow.get("action") == "reset":
        extra["rebuilt"] = "all"
    if extra:
        extra["delta_version"] = summary.get("delta_version_after")
    return extra


class SluicePipelineOperator(SparkSubmitOperator):
    """Run the pipeline of ``spec_path`` once (one one-shot streaming query) and return its run summary.

    The spark-submit arguments come from :func:`sluice.submit.build_submit_plan`, the code path
    ``sluice run`` uses too. The run summary is logged and returned (so it is the task's XCom value).

    :param spec_path: the pipeline's YAML spec (re-read at run time).
    :param trigger: override the spec's trigger (``available_now`` or ``once``).
    """

    template_fields: Sequence[str] = (*SparkSubmitOperator.template_fields, "spec_path", "trigger")
    ui_color = "#9ad0f5"

    def __init__(self, *, spec_path: str, trigger: str | None = None, **kwargs: Any) -> None:
        settings = load_settings()
        kwargs.setdefault("conn_id", settings.spark_conn_id)
        kwargs.setdefault("name", f"sluice-{Path(spec_path).stem}")
        super().__init__(application=str(spark_jobs_dir() / "run_pipeline.py"), **kwargs)
        self.spec_path = spec_path
        self.trigger = trigger

    def execute(self, context: Any) -> dict[str, Any]:
        settings = load_settings()
        spec = load_spec(self.spec_path)
        params = context.get("params") or {}
        try:
            request = run_request(
                spec, mode=params.get("mode"), trigger=self.trigger or params.get("trigger"),
                max_files_per_trigger=params.get("max_files_per_trigger"),
                max_offsets_per_trigger=params.get("max_offsets_per_trigger"),
                backfill_from=params.get("backfill_from"), backfill_to=params.get("backfill_to"),
                test_mode=is_dry_run(), backfill_interval=backfill_interval(context),
            )
        except RunRequestError as err:
            raise InvalidRunRequest(f"{spec.name}: {err}") from None
        dry_run, reset = request.dry_run, request.reset
        ti = context["ti"]
        airflow = {"dag_id": ti.dag_id, "dag_run_id": context["run_id"], "try_number": ti.try_number}
        run_id = f"{context['run_id']}#{ti.try_number}"
        lock = run_lock(settings.checkpoint_root, spec.name, airflow, dry_run=dry_run,
                        backfill=request.backfill is not None)
        with tempfile.TemporaryDirectory(prefix="sluice-run-") as tmp:
            plan = build_submit_plan(
                self.spec_path, spec, settings, trigger=request.trigger, dry_run=dry_run, reset=reset,
                run_id=run_id, summary_file=Path(tmp) / "summary.json", secret_env=kafka_secret_env(spec),
                airflow=airflow, request=request,
            )
            self._use_plan(plan)
            if request.backfill is not None:
                self.log.info("backfill of %s: rebuilds the rows with %s in %s; the checkpoint is not touched",
                              spec.name, spec.backfill.column, request.backfill.label)
            if dry_run:
                self.log.info("dry run (%s): checkpoint and table are not touched",
                              "AIRFLOW_TEST_MODE is set" if is_dry_run() else "mode=dry_run")
            if reset:
                self.log.warning("mode=reset: a new checkpoint; the table's content is replaced from the source")
            started = time.monotonic()
            try:
                with lock:
                    super().execute(context)
            except PipelineBusy as busy:
                raise SluiceRunFailed(str(busy)) from None
            except AirflowException as err:
                summary = plan.read_summary()
                if summary and summary.get("error"):
                    raise SluiceRunFailed(f"run of {spec.name} failed: {summary['error']}") from err
                raise
            summary = plan.read_summary()
        if summary is None:
            raise SluiceRunFailed(f"run of {spec.name} wrote no run summary; see the Spark output above")
        # the whole spark-submit, seen from the task: what the task adds is its wall time minus this
        summary.setdefault("phases_s", {})["spark_submit"] = round(time.monotonic() - started, 3)
        self.log.info(
            "sluice %s%s: %s batches, %s rows in, %s rows out, Delta version %s -> %s",
            spec.name, " (dry run)" if dry_run else "", summary["batches"], summary["input_rows"],
            summary["output_rows"], summary["delta_version_before"], summary["delta_version_after"],
        )
        for warning in quality_warnings(summary):
            self.log.warning("%s", warning)
        if self.outlets and not table_changed(summary):
            # the sink table's Asset is this task's outlet: a run that changed nothing must not wake the
            # pipelines scheduled on it (Airflow emits an event for every outlet of a successful task)
            self.log.info("no new rows in the table: no Asset event for %s", ", ".join(a.name for a in self.outlets))
            self.outlets = []
        elif self.outlets and event_extra(summary):
            for asset in self.outlets:
                context["outlet_events"][asset].extra = event_extra(summary)
        if summary.get("ledger_error"):
            self.log.warning("%s", summary["ledger_error"])
        self.log.info("run summary: %s", json.dumps(summary))
        return summary

    def _use_plan(self, plan) -> None:
        """Hand the plan's fields to SparkSubmitOperator, whose hook builds, logs and runs the command."""
        require_spark_connection(plan.conn_id)
        self.application = plan.application
        self.application_args = plan.application_args
        self.conf = plan.conf
        self.jars = plan.jars
        self.name = plan.name
        self.env_vars = plan.env_vars
        self._conn_id = plan.conn_id

    def on_kill(self) -> None:
        """Kill the whole spark-submit process tree (the JVM and the Python driver under it), not only the
        spark-submit process the provider knows: no orphan writer may keep running beside the retry."""
        process = getattr(getattr(self, "_hook", None), "_submit_sp", None)
        if process is not None and process.poll() is None:
            killed = kill_tree(process.pid)
            self.log.info("on_kill: killed the spark-submit process tree %s", killed)
        super().on_kill()


class SluiceMaintenanceOperator(SluicePipelineOperator):
    """OPTIMIZE and VACUUM the tables of the pipeline of ``spec_path`` (``spark_jobs/maintain.py``) and return
    the maintenance summary (files compacted, bytes removed) as the task's XCom value.

    Holds the pipeline's lock like a run, but waits up to ``lock_wait_seconds`` for a running run to finish
    instead of failing. Under ``airflow tasks test`` it is a dry run (VACUUM DRY RUN; nothing changes).
    """

    ui_color = "#c9e3b5"

    def __init__(self, *, spec_path: str, lock_wait_seconds: float = 1800, **kwargs: Any) -> None:
        kwargs.setdefault("name", f"sluice-maintain-{Path(spec_path).stem}")
        super().__init__(spec_path=spec_path, **kwargs)
        self.application = str(spark_jobs_dir() / "maintain.py")
        self.lock_wait_seconds = lock_wait_seconds

    def execute(self, context: Any) -> dict[str, Any]:
        settings = load_settings()
        spec = load_spec(self.spec_path)
        dry_run = is_dry_run()
        ti = context["ti"]
        airflow = {"dag_id": ti.dag_id, "dag_run_id": context["run_id"], "try_number": ti.try_number}
        run_id = f"{context['run_id']}#{ti.try_number}"
        lock = (contextlib.nullcontext() if dry_run else
                maintenance_lock(settings.checkpoint_root, spec.name, {**airflow, "run_id": run_id,
                                                                       "mode": "maintenance"}, self.lock_wait_seconds))
        with tempfile.TemporaryDirectory(prefix="sluice-maintain-") as tmp:
            plan = build_maintenance_plan(self.spec_path, spec, settings, dry_run=dry_run, run_id=run_id,
                                          summary_file=Path(tmp) / "summary.json", airflow=airflow)
            self._use_plan(plan)
            started = time.monotonic()
            try:
                with lock:
                    SparkSubmitOperator.execute(self, context)
            except PipelineBusy as busy:
                raise SluiceRunFailed(str(busy)) from None
            except AirflowException as err:
                summary = plan.read_summary()
                if summary and summary.get("error"):
                    raise SluiceRunFailed(f"maintenance of {spec.name} failed: {summary['error']}") from err
                raise
            summary = plan.read_summary()
        if summary is None:
            raise SluiceRunFailed(f"maintenance of {spec.name} wrote no summary; see the Spark output above")
        summary.setdefault("phases_s", {})["spark_submit"] = round(time.monotonic() - started, 3)
        self.log.info(
            "sluice maintenance of %s%s: OPTIMIZE compacted %s files into %s, VACUUM removed %s files (%s bytes)",
            spec.name, " (dry run: nothing changed)" if dry_run else "", summary["files_compacted"],
            summary["files_written"], summary["files_removed"], summary["bytes_removed"],
        )
        if summary.get("note"):
            self.log.info("%s", summary["note"])
        self.log.info("maintenance summary: %s", json.dumps(summary))
        return summary
