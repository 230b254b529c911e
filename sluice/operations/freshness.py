"""Is a pipeline's data fresh? (``freshness: {warn_after: 2h, error_after: 6h}`` in its spec.)

The age checked is that of the newest committed data: the end of the last run that wrote rows (a real run
that succeeded with ``output_rows`` > 0, from the run ledger), and beside it the age of the last successful
run of any kind (a pipeline whose source is quiet runs fine and writes nothing: its data ages, its runs do
not). Older than ``warn_after``: ``warn``; older than ``error_after``: ``error``; no data committed yet:
``error`` (``warn`` without an ``error_after``), saying so. The alert names the pipeline, the ages, the
backlog (:mod:`sluice.operations.backlog`) and the last run's error.

Read with delta-rs and a listing (no Spark); sent by the ``sluice_freshness`` DAG
(:mod:`sluice_airflow.freshness`) to the Airflow connection the spec or ``SLUICE_ALERT_CONN_ID`` names.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sluice.operations.backlog import describe, measure
from sluice.operations.ledger import latest_runs
from sluice.settings import Settings
from sluice.spec import PipelineSpec, duration_seconds

WROTE_ROWS = "dry_run = false AND status = 'succeeded' AND output_rows > 0"
SUCCEEDED = "dry_run = false AND status = 'succeeded'"
REAL = "dry_run = false"


def check(spec: PipelineSpec, settings: Settings, now: datetime | None = None, *,
          backlog: dict[str, Any] | None = None) -> dict[str, Any]:
    """The pipeline's freshness: ``level`` (``fresh``, ``warn`` or ``error``), the ages in seconds (None:
    never), the thresholds, the backlog (measured unless given), the last run's status and error, and
    ``message``, one line."""
    if spec.freshness is None:
        raise ValueError(f"pipeline {spec.name} has no freshness: section")
    now = now or datetime.now(UTC)
    ledger = str(settings.ledger_path)
    wrote = latest_runs(ledger, spec.names, 1, where=WROTE_ROWS)
    succeeded = latest_runs(ledger, spec.names, 1, where=SUCCEEDED)
    last = latest_runs(ledger, spec.names, 1, where=REAL)
    data_at = _ended(wrote[0]) if wrote else None
    run_at = _ended(succeeded[0]) if succeeded else None
    warn, error = duration_seconds(spec.freshness.warn_after), (
        duration_seconds(spec.freshness.error_after) if spec.freshness.error_after else None)
    data_age = None if data_at is None else max(0.0, (now - data_at).total_seconds())
    if data_age is None:
        level = "error" if error is not None else "warn"
    elif error is not None and data_age > error:
        level = "error"
    elif data_age > warn:
        level = "warn"
    else:
        level = "fresh"
    backlog = backlog if backlog is not None else measure(spec, settings)
    found = {
        "pipeline": spec.name,
        "level": level,
        "data_age_s": None if data_age is None else round(data_age),
        "data_at": data_at.isoformat(timespec="seconds") if data_at else None,
        "run_age_s": None if run_at is None else round(max(0.0, (now - run_at).total_seconds())),
        "warn_after": spec.freshness.warn_after,
        "error_after": spec.freshness.error_after,
        "backlog": backlog,
        "last_run": {"run_id": last[0]["run_id"], "status": last[0]["status"], "error": last[0]["error"],
                     "started_at": _iso(last[0]["started_at"])} if last else None,
        "checked_at": now.isoformat(timespec="seconds"),
    }
    found["message"] = message(found)
    return found


def message(found: dict[str, Any]) -> str:
    """The alert in one line."""
    name, level = found["pipeline"], found["level"]
    if found["data_age_s"] is None:
        age = "has committed no data yet"
    else:
        age = f"last committed data {_span(found['data_age_s'])} ago ({found['data_at']})"
    limit = found["error_after"] if level == "error" and found["error_after"] else found["warn_after"]
    text = f"sluice freshness {level.upper()}: pipeline {name} {age}"
    if level != "fresh":
        text += f", over its {'error_after' if limit == found['error_after'] else 'warn_after'} of {limit}"
    text += f"; backlog: {describe(found['backlog'])}"
    last = found["last_run"]
    if last and last.get("error"):
        text += f"; last run {last['run_id']} {last['status']}: {last['error'][:300]}"
    elif last:
        text += f"; last run {last['run_id']} {last['status']}"
    return text


def _ended(run: dict[str, Any]) -> datetime:
    at = run.get("ended_at") or run["started_at"]
    return at if at.tzinfo else at.replace(tzinfo=UTC)


def _iso(at: Any) -> str | None:
    return at.isoformat(timespec="seconds") if hasattr(at, "isoformat") else at


def _span(seconds: float) -> str:
    seconds = int(seconds)
    if seconds < 120:
        return f"{seconds} s"
    if seconds < 7200:
        return f"{seconds // 60} min"
    if seconds < 172800:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} d"
