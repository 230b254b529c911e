"""Every pipeline at a glance: its last runs, backlog, freshness and table version, from the specs, the
checkpoints and the run ledger (delta-rs and listings: no Spark, no Airflow). What the pipelines page in the
Airflow UI shows (:mod:`sluice_airflow.page`), and its JSON."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sluice.operations.backlog import measure
from sluice.operations.ledger import latest_runs
from sluice.settings import Settings
from sluice.spec import DeltaSource, KafkaSource, PipelineSpec
from sluice.spec.catalog import PipelineCatalog, resolve_upstream

RUNS_SHOWN = 10
"""How many of each pipeline's latest real runs (not dry runs, not maintenance) the page charts."""


def overview(settings: Settings, *, runs: int = RUNS_SHOWN, now: datetime | None = None) -> dict[str, Any]:
    """``{"pipelines": [...], "errors": [...], "ledger": path, "at": iso}``: one entry per valid spec (sorted
    by name), the invalid specs' errors beside them."""
    catalog = PipelineCatalog.load(settings.pipelines_dir)
    now = now or datetime.now(UTC)
    found = []
    for spec in sorted(catalog.specs.values(), key=lambda s: s.name):
        found.append(pipeline_overview(resolve_upstream(spec, settings), settings, runs=runs, now=now))
    return {"pipelines": found, "errors": [str(err) for err in catalog.errors], "ledger": str(settings.ledger_path),
            "at": now.isoformat(timespec="seconds")}


def pipeline_overview(spec: PipelineSpec, settings: Settings, *, runs: int = RUNS_SHOWN,
                      now: datetime | None = None) -> dict[str, Any]:
    """One pipeline: what it reads and writes, its latest runs (newest first), backlog, freshness."""
    ledger = str(settings.ledger_path)
    # the pipeline's own runs: not dry runs, not the maintenance DAG's OPTIMIZE/VACUUM
    latest = latest_runs(ledger, spec.names, runs, where="dry_run = false AND mode <> 'maintenance'")
    backlog = measure(spec, settings)
    freshness = None
    if spec.freshness is not None:
        from sluice.operations.freshness import check

        found = check(spec, settings, now=now, backlog=backlog)
        freshness = {k: found[k] for k in ("level", "data_age_s", "data_at", "warn_after", "error_after", "message")}
    last = latest[0] if latest else None
    source = spec.source
    return {
        "name": spec.name,
        "source": "kafka" if isinstance(source, KafkaSource) else "delta" if isinstance(source, DeltaSource) else source.format,
        "reads": ", ".join(source.topics or [source.subscribe_pattern or ""]) if isinstance(source, KafkaSource)
        else source.table if isinstance(source, DeltaSource) and source.table and not source.path
        else spec.source_path(settings),
        "sink": spec.sink_path(settings),
        "table": spec.table_name(settings),
        "quarantine": spec.quarantine_table_path(settings),
        "schedule": spec.schedule if isinstance(spec.schedule, str) or spec.schedule is None
        else "after " + ", ".join(spec.schedule.pipelines),
        "delta_version": next((r["delta_version_after"] for r in latest if r["delta_version_after"] is not None), None),
        "last_run": _run(last) if last else None,
        "runs": [_run(r) for r in latest],
        "backlog": backlog,
        "freshness": freshness,
    }


def _run(run: dict[str, Any]) -> dict[str, Any]:
    started = run.get("started_at")
    return {
        "run_id": run["run_id"], "status": run["status"], "mode": run["mode"],
        "started_at": started.isoformat(timespec="seconds") if hasattr(started, "isoformat") else started,
        "duration_s": run.get("duration_s"), "dag_id": run.get("dag_id"), "dag_run_id": run.get("dag_run_id"),
        "input_rows": run.get("input_rows") or 0, "output_rows": run.get("output_rows") or 0,
        "quarantined_rows": run.get("quarantined_rows") or 0, "error": run.get("error"),
        "delta_version": run.get("delta_version_after"),
    }
