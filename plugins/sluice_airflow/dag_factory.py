"""One Airflow DAG per pipeline spec. Imported by the files in ``dags/``; never imports PySpark."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pendulum
from airflow.sdk import DAG, Asset, Param

from sluice.run_request import RUN_MODES, TRIGGERS
from sluice.settings import Settings, load_settings
from sluice.spec import (
    AssetSchedule,
    DeltaSource,
    KafkaSource,
    PipelineSpec,
    SpecError,
    load_pipeline_dir,
    upstream_spec,
)
from sluice_airflow.pipeline_operator import SluicePipelineOperator

START_DATE = pendulum.datetime(2026, 1, 1, tz="UTC")


def table_asset(spec: PipelineSpec, settings: Settings | None = None) -> Asset:
    """The Airflow Asset of a pipeline's sink table: the outlet of its task, the schedule of the pipelines
    that name it in ``schedule: {asset: ...}``."""
    path = spec.sink_path(settings or load_settings())
    table = path if "://" in path else Path(path).as_uri()
    # The identity is the pipeline, not the table's location: Airflow deactivates an Asset whose name is taken
    # by another URI, so a lake moved to a new root would make the task fail until the old one was orphaned.
    return Asset(name=f"sluice.{spec.name}", uri=f"sluice://{spec.name}", extra={"pipeline": spec.name, "table": table})


def build_dag(spec_path: Path, spec: PipelineSpec, specs_by_name: dict[str, PipelineSpec] | None = None) -> DAG:
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
        f"\n* sink: Delta `{spec.sink.path or spec.name}` ({spec.sink.mode})\n* trigger: {spec.trigger}"
    )
    schedule = spec.schedule
    if isinstance(schedule, AssetSchedule):
        # runs when each upstream pipeline's table was updated: a run that wrote nothing emits no event
        known = specs_by_name or {}
        schedule = [table_asset(known.get(name) or upstream_spec(name, load_settings(), spec.name))
                    for name in schedule.pipelines]
        doc += f"\n* runs when these tables were updated: {', '.join(spec.schedule.pipelines)}"
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
        SluicePipelineOperator(task_id="ingest", spec_path=str(spec_path), outlets=[table_asset(spec)])
    return dag


def run_params(spec: PipelineSpec) -> dict[str, Param]:
    """The "Trigger DAG" form. The JSON schema checks each field; sluice.run_request checks how they fit
    together (and the spec) when the task starts, before Spark does."""
    backfill = (f"the rows whose {spec.backfill.column} is in the range are rebuilt"
                if spec.backfill else "this pipeline has no backfill section: backfill runs are refused")
    return {
        "mode": Param(
            "incremental", type="string", enum=list(RUN_MODES), title="Run mode",
            description="incremental: ingest what is new since the last run. dry_run: report what an incremental "
            "run would ingest, change nothing. backfill: rebuild the days backfill_from..backfill_to of the table "
            f"({backfill}; the checkpoint is not touched). reset: start a new checkpoint and REPLACE the table's "
            "content from the source.",
        ),
        "trigger": Param(
            spec.trigger, type="string", enum=list(TRIGGERS), title="Trigger",
            description="available_now: everything new, in as many micro-batches as the rate limit allows. "
            "once: everything new in one micro-batch (rate limits do not apply).",
        ),
        "max_files_per_trigger": Param(
            None, type=["null", "integer"], minimum=1, title="Max files per micro-batch",
            description="File sources: at most this many files per micro-batch in this run (empty: the spec's "
            "source.max_files_per_trigger).",
        ),
        "max_offsets_per_trigger": Param(
            None, type=["null", "integer"], minimum=1, title="Max records per micro-batch",
            description="Kafka sources: at most this many records per micro-batch in this run (empty: the spec's "
            "source.max_offsets_per_trigger).",
        ),
        "backfill_from": Param(
            None, type=["null", "string"], format="date", title="Backfill from (day)",
            description="mode backfill: the first day to rebuild (YYYY-MM-DD). Airflow backfill runs use their "
            "data interval instead.",
        ),
        "backfill_to": Param(
            None, type=["null", "string"], format="date", title="Backfill to (day, inclusive)",
            description="mode backfill: the last day to rebuild (YYYY-MM-DD).",
        ),
    }


def pipeline_dags(folder: Path | None = None) -> dict[str, DAG]:
    """The DAGs of every valid spec in the pipelines folder, by dag_id. Invalid specs are left out here
    and reported by :func:`raise_spec_errors` from a DAG file of their own."""
    specs, _ = load_pipeline_dir(folder or load_settings().pipelines_dir)
    by_name = {spec.name: spec for spec in specs.values()}
    return {spec.name: build_dag(path, spec, by_name) for path, spec in specs.items()}


class InvalidPipelineSpecs(SpecError):
    """Raised while parsing ``dags/sluice_spec_errors.py`` so that Airflow lists it as an import error."""


def raise_spec_errors(folder: Path | None = None) -> None:
    folder = folder or load_settings().pipelines_dir
    _, errors = load_pipeline_dir(folder)
    if errors:
        problems = [line for err in errors for line in str(err).splitlines()]
        raise InvalidPipelineSpecs(
            f"{len(errors)} invalid pipeline spec(s) in {folder} (their DAGs are not loaded; the others are)",
            problems,
        )
