"""One Airflow DAG per pipeline spec. Imported by the files in ``dags/``; never imports PySpark."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pendulum
from airflow.sdk import DAG, Param

from sluice.settings import load_settings
from sluice.spec import KafkaSource, PipelineSpec, SpecError, load_pipeline_dir
from sluice_airflow.pipeline_operator import RUN_MODES, SluicePipelineOperator

START_DATE = pendulum.datetime(2026, 1, 1, tz="UTC")


def build_dag(spec_path: Path, spec: PipelineSpec) -> DAG:
    doc = spec.description or f"sluice pipeline `{spec.name}`"
    source = spec.source
    if isinstance(source, KafkaSource):
        where = ", ".join(source.topics or []) or f"pattern {source.subscribe_pattern}"
    else:
        where = source.path
    doc += (
        f"\n\n* spec: `{spec_path}`\n* source: {source.format} `{where}`"
        f"\n* sink: Delta `{spec.sink.path or spec.name}` ({spec.sink.mode})\n* trigger: {spec.trigger}"
    )
    with DAG(
        dag_id=spec.name,
        schedule=spec.schedule,
        start_date=START_DATE,
        catchup=False,
        # one run at a time: two queries on one checkpoint must never overlap
        max_active_runs=1,
        tags=["sluice", f"source:{spec.source.format}"],
        doc_md=doc,
        default_args={"retries": spec.retries, "retry_delay": timedelta(seconds=spec.retry_delay_seconds)},
        params={
            "mode": Param(
                "incremental", type="string", enum=list(RUN_MODES),
                description="incremental: ingest what is new. dry_run: report what would be ingested, change "
                "nothing. reset: start a new checkpoint and REPLACE the table's content from the source.",
            ),
            "trigger": Param(
                spec.trigger, type="string", enum=["available_now", "once"],
                description="available_now: everything new, in as many batches as the rate limits allow. "
                "once: one batch.",
            ),
        },
    ) as dag:
        SluicePipelineOperator(task_id="ingest", spec_path=str(spec_path))
    return dag


def pipeline_dags(folder: Path | None = None) -> dict[str, DAG]:
    """The DAGs of every valid spec in the pipelines folder, by dag_id. Invalid specs are left out here
    and reported by :func:`raise_spec_errors` from a DAG file of their own."""
    specs, _ = load_pipeline_dir(folder or load_settings().pipelines_dir)
    return {spec.name: build_dag(path, spec) for path, spec in specs.items()}


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
