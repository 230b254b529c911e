"""``sluice status``: a pipeline's latest runs from the run ledger, read with delta-rs (no JVM)."""

from __future__ import annotations

import json

from sluice.operations.ledger import latest_runs
from sluice.settings import Settings
from sluice.spec import PipelineSpec

STATUS_COLUMNS = (
    ("started_at", "started (UTC)"), ("run_id", "run"), ("mode", "mode"), ("status", "status"),
    ("batches", "batches"), ("input_rows", "rows in"), ("output_rows", "rows out"),
    ("quarantined_rows", "quarantined"),
    ("versions", "versions"), ("backlog", "backlog after"), ("duration_s", "secs"), ("error", "error"),
)


def status_table(runs: list[dict]) -> str:
    """The runs as a plain-text table, newest first."""
    rows = []
    for run in runs:
        before, after = run.get("delta_version_before"), run.get("delta_version_after")
        cells = {
            **run,
            "started_at": run["started_at"].strftime("%Y-%m-%d %H:%M:%S") if run.get("started_at") else "",
            "run_id": run["run_id"] if not run.get("dag_id") else f"{run['dag_run_id']} (try {run['try_number']})",
            # new->1: the run created the table; 4: nothing written; 4->6: versions 5 and 6 are this run's
            "versions": "-" if after is None else (
                f"{after}" if before == after else f"{'new' if before is None else before}->{after}"),
            "backlog": _backlog(run),
            "error": (run.get("error") or "")[:80],
        }
        rows.append(["" if cells.get(k) is None else str(cells[k]) for k, _ in STATUS_COLUMNS])
    header = [title for _, title in STATUS_COLUMNS]
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(line, widths)).rstrip() for line in [header, *rows]]
    return "\n".join([lines[0], "  ".join("-" * w for w in widths), *lines[1:]])


def _backlog(run: dict) -> str | None:
    """What waited once the run ended (a dry run: what it found waiting), in a few words."""
    text = run.get("backlog_after") or (run.get("backlog_before") if run.get("dry_run") else None)
    if not text:
        return None
    backlog = json.loads(text)
    if backlog.get("error"):
        return "unknown"
    return {"files": f"{backlog.get('files')} files", "kafka": f"{backlog.get('offsets')} offsets",
            "delta": f"{backlog.get('versions')} versions"}.get(backlog.get("source"))


def show_status(spec: PipelineSpec, settings: Settings, limit: int = 10, as_json: bool = False) -> int:
    """Read with delta-rs: no JVM, answers in about a second."""
    runs = latest_runs(str(settings.ledger_path), spec.names, limit)
    if as_json:
        for run in runs:
            print(json.dumps(run, default=str))
    elif not runs:
        print(f"{spec.name}: no runs in the ledger {settings.ledger_path} yet")
    else:
        before = f" (earlier: {', '.join(spec.previous_names)})" if spec.previous_names else ""
        print(f"== {spec.name}{before}: latest runs (ledger {settings.ledger_path})")
        print(status_table(runs))
    return 0
