"""One Airflow DAG per pipeline spec. Imported by the files in ``dags/``; never imports PySpark."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pendulum
from airflow.sdk import (
    DAG,
    Asset,
    CronDataIntervalTimetable,
    Param,
    get_parsing_context,
)

from sluice.contract.request import RUN_MODES, TRIGGERS
from sluice.settings import Settings, load_settings
from sluice.spec import (
    AssetSchedule,
    DeltaSource,
    KafkaSource,
    PipelineSpec,
    SpecError,
)
from sluice.spec.catalog import PipelineCatalog
from sluice_airflow.pipeline_operator import (
    SluiceMaintenanceOperator,
    SluicePipelineOperator,
)

START_DATE = pendulum.datetime(2026, 1, 1, tz="UTC")


def table_asset(spec: PipelineSpec, settings: Settings | None = None) -> Asset:
    """The Airflow Asset of a pipeline's sink table: the outlet of its task, the schedule of the pipelines
    that name it in ``schedule: {asset: ...}``."""
    path = spec.sink_path(settings or load_settings())
    table = path if "://" in path else Path(path).as_uri()
    # The identity is the pipeline, not the table's location: Airflow deactivates an Asset whose name is taken
    # by another URI, so a lake moved to a new root would make the task fail until the old one was orphaned.
    # A renamed pipeline keeps its first name's asset (its identity): readers scheduled on it go on, under
    # either name.
    return Asset(name=f"sluice.{spec.identity}", uri=f"sluice://{spec.identity}",
                 extra={"pipeline": spec.name, "table": table})


def build_dag(spec_path: Path, spec: PipelineSpec, specs_by_name: dict[str, PipelineSpec] | None = None,
              settings: Settings | None = None) -> DAG:
    settings = settings or load_settings()
    doc = spec.description or f"sluice pipeline `{spec.name}`"
    source = spec.source
    if isinstance(source, KafkaSource):
        where = ", ".join(source.topics or []) or f"pattern {source.subscribe_pattern}"
    elif isinstance(source, DeltaSource):
        where = f"pipeline {source.pipeline}" if source.pipeline else source.path
    else:
        where = source.path
    doc += (
        f"\n\n* spec: `{spec_path}`\n* source: {source.format} `{where}`"
        f"\n* sink: Delta `{spec.sink.path or spec.identity}` ({spec.sink.mode})\n* trigger: {spec.trigger}"
    )
    schedule = spec.schedule
    if isinstance(schedule, AssetSchedule):
        # runs when each upstream pipeline's table was updated: a run that wrote nothing emits no event
        known = specs_by_name or {}
        schedule = [table_asset(known.get(name) or PipelineCatalog(settings.pipelines_dir).upstream(name, spec.name),
                                settings) for name in schedule.pipelines]
        doc += f"\n* runs when these tables were updated: {', '.join(spec.schedule.pipelines)}"
    elif isinstance(schedule, str) and spec.backfill is not None and schedule not in ("@once", "@continuous"):
        # a backfill run rebuilds its data interval: a cron string gives runs whose interval is empty
        # (Airflow 3's CronTriggerTimetable), so give the days a backfill creates their interval
        schedule = CronDataIntervalTimetable(schedule, timezone="UTC")
    with DAG(
        dag_id=spec.name,
        schedule=schedule,
        start_date=START_DATE,
        catchup=False,
        # one run at a time: two queries on one checkpoint must never overlap
        max_active_runs=1,
        tags=["sluice", f"source:{spec.source.format}"],
        doc_md=doc,
        default_args={"retries": spec.retries, "retry_delay": timedelta(seconds=spec.retry_delay_seconds)},
        params=run_params(spec),
    ) as dag:
        # a slot of the sluice pool per spark-submit: Airflow's admission control, by the spec's priority
        SluicePipelineOperator(task_id="ingest", spec_path=str(spec_path), outlets=[table_asset(spec, settings)],
                               pool=settings.airflow_pool, priority_weight=spec.priority, weight_rule="absolute")
    return dag


# The JSON Schema dialect of the form's fields. Airflow checks every Param's schema against its dialect's
# meta-schema each time a scheduled DAG is made (DAG.__init__ -> ParamsDict.validate -> jsonschema.validate);
# against 2020-12's meta-schema, the default, that took 0.42 ms a field, half of the parse of 1,000 specs (2.5 of
# 5.9 s; bench P5), against draft 7's 0.10 ms. The fields use only keywords both dialects read alike (type, enum,
# minimum, format), and the trigger form and the API validate them the same way.
DIALECT = {"$schema": "http://json-schema.org/draft-07/schema#"}


def run_params(spec: PipelineSpec) -> dict[str, Param]:
    """The "Trigger DAG" form. The JSON schema checks each field; sluice.contract.request checks how they fit
    together (and the spec) when the task starts, before Spark does."""
    backfill = (f"the rows whose {spec.backfill.column} is in the range are rebuilt"
                if spec.backfill else "this pipeline has no backfill section: backfill runs are refused")
    return {
        "mode": Param(
            "incremental", type="string", enum=list(RUN_MODES), **DIALECT, title="Run mode",
            description="incremental: ingest what is new since the last run. dry_run: report what an incremental "
            "run would ingest, change nothing. backfill: rebuild the days backfill_from..backfill_to of the table "
            f"({backfill}; the checkpoint is not touched). reset: start a new checkpoint and REPLACE the table's "
            "content from the source.",
        ),
        "trigger": Param(
            spec.trigger, type="string", enum=list(TRIGGERS), **DIALECT, title="Trigger",
            description="available_now: everything new, in as many micro-batches as the rate limit allows. "
            "once: everything new in one micro-batch (rate limits do not apply).",
        ),
        "max_files_per_trigger": Param(
            None, type=["null", "integer"], minimum=1, **DIALECT, title="Max files per micro-batch",
            description="File sources: at most this many files per micro-batch in this run (empty: the spec's "
            "source.max_files_per_trigger).",
        ),
        "max_offsets_per_trigger": Param(
            None, type=["null", "integer"], minimum=1, **DIALECT, title="Max records per micro-batch",
            description="Kafka sources: at most this many records per micro-batch in this run (empty: the spec's "
            "source.max_offsets_per_trigger).",
        ),
        "backfill_from": Param(
            None, type=["null", "string"], format="date", **DIALECT, title="Backfill from (day)",
            description="mode backfill: the first day to rebuild (YYYY-MM-DD). Airflow backfill runs use their "
            "data interval instead.",
        ),
        "backfill_to": Param(
            None, type=["null", "string"], format="date", **DIALECT, title="Backfill to (day, inclusive)",
            description="mode backfill: the last day to rebuild (YYYY-MM-DD).",
        ),
    }


MAINTENANCE_DAG_ID = "sluice_maintenance"
FRESHNESS_DAG_ID = "sluice_freshness"


def _lake_dag(dag_id: str, folder: Path | None, schedule: str | None, *, wants, line, task, about: str,
              none: str, **dag_args: Any) -> DAG:
    """One DAG for the lake with a task per pipeline whose spec ``wants`` it (``task(path, spec)`` makes it),
    sorted by name, each listed in the DAG's doc by ``line(spec)``."""
    specs = PipelineCatalog.load(folder or load_settings().pipelines_dir).specs
    chosen = sorted(((path, spec) for path, spec in specs.items() if wants(spec)), key=lambda item: item[1].name)
    lines = [f"* `{spec.name}`: {line(spec)}" for _, spec in chosen]
    with DAG(dag_id=dag_id, schedule=schedule, start_date=START_DATE, catchup=False, max_active_runs=1,
             tags=["sluice", dag_id.removeprefix("sluice_")],
             doc_md=f"{about}\n\n" + ("\n".join(lines) or none), **dag_args) as dag:
        for path, spec in chosen:
            task(path, spec)
    return dag


def maintenance_dag(folder: Path | None = None, schedule: str | None = "@daily") -> DAG:
    """One DAG for the lake: a task per pipeline (``maintain_<name>``) that OPTIMIZEs and VACUUMs its sink and
    quarantine tables as the spec's ``maintenance:`` section says. Tasks run one at a time: each is a
    spark-submit, and each waits for a running run of its pipeline to finish (the pipeline lock)."""

    def line(spec: PipelineSpec) -> str:
        kept = spec.maintenance
        return ", ".join(filter(None, [
            "OPTIMIZE" + (f" ZORDER BY {', '.join(kept.zorder_by)}" if kept.zorder_by else "") if kept.optimize else None,
            f"VACUUM RETAIN {kept.vacuum_retention_hours} HOURS" if kept.vacuum else None]))

    pool = load_settings().airflow_pool  # each task is a spark-submit: a slot of the sluice pool, as a run's
    return _lake_dag(
        MAINTENANCE_DAG_ID, folder, schedule, wants=lambda spec: spec.maintenance.enabled, line=line,
        task=lambda path, spec: SluiceMaintenanceOperator(task_id=f"maintain_{spec.name}", spec_path=str(path),
                                                          pool=pool),
        about="sluice maintenance: compacts the small files one-shot runs leave (OPTIMIZE) and deletes files "
              "no version within the retention needs (VACUUM, never below Delta's 168 h unless a spec forces "
              "it). Each task's XCom is its summary (files compacted, bytes removed); the ledger has a row "
              "per task (mode maintenance).",
        none="no pipeline has maintenance enabled",
        max_active_tasks=1, default_args={"retries": 1, "retry_delay": timedelta(minutes=5)})


def freshness_dag(folder: Path | None = None, schedule: str | None = "*/15 * * * *") -> DAG:
    """One DAG for the lake: a task per pipeline with a ``freshness:`` section (``freshness_<name>``) that
    alerts when its newest committed data is older than ``warn_after`` and fails past ``error_after``
    (:mod:`sluice_airflow.freshness`). No Spark: each task reads the ledger and lists the source."""
    from sluice_airflow.freshness import SluiceFreshnessOperator

    return _lake_dag(
        FRESHNESS_DAG_ID, folder, schedule, wants=lambda spec: spec.freshness is not None,
        line=lambda spec: f"warn after {spec.freshness.warn_after}"
        + (f", error after {spec.freshness.error_after}" if spec.freshness.error_after else ""),
        task=lambda path, spec: SluiceFreshnessOperator(task_id=f"freshness_{spec.name}", spec_path=str(path)),
        about="sluice freshness: alerts when a pipeline's newest committed data is older than its spec's "
              "`freshness.warn_after` (the task fails past `error_after`), naming the age, the backlog and the "
              "last run's error; sent to the Airflow connection `freshness.notify` or SLUICE_ALERT_CONN_ID "
              "names (a webhook or SMTP).",
        none="no pipeline has a freshness: section", default_args={"retries": 0})


def pipeline_dags(folder: Path | None = None) -> dict[str, DAG]:
    """The DAGs of every valid spec in the pipelines folder, by dag_id. Invalid specs are left out here
    and reported by :func:`raise_spec_errors` from a DAG file of their own.

    A task's own process parses the file for one DAG (Airflow's parsing context names it): then only that
    DAG is made. Every spec is still read (an Asset schedule names its upstream's table), but a DAG object
    costs ~4 ms to make and a spec ~0.5 ms to read: with 1,000 specs, each task would otherwise spend ~4 s
    making 999 DAGs it does not run (bench P5)."""
    settings = load_settings()
    specs = PipelineCatalog.load(folder or settings.pipelines_dir).specs
    by_name = {name: spec for spec in specs.values() for name in spec.names}  # an upstream's earlier names too
    wanted = get_parsing_context().dag_id
    if any(spec.name == wanted for spec in specs.values()):
        specs = {path: spec for path, spec in specs.items() if spec.name == wanted}
    return {spec.name: build_dag(path, spec, by_name, settings) for path, spec in specs.items()}


class InvalidPipelineSpecs(SpecError):
    """Raised while parsing ``dags/sluice_spec_errors.py`` so that Airflow lists it as an import error."""


def raise_spec_errors(folder: Path | None = None) -> None:
    folder = folder or load_settings().pipelines_dir
    errors = PipelineCatalog.load(folder).errors
    if errors:
        problems = [line for err in errors for line in str(err).splitlines()]
        raise InvalidPipelineSpecs(
            f"{len(errors)} invalid pipeline spec(s) in {folder} (their DAGs are not loaded; the others are)",
            problems,
        )
