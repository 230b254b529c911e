"""The pipelines page: "sluice" in the Airflow UI's navigation, served by the Airflow API server through this
plugin's own FastAPI app (mounted at ``/sluice``).

For every pipeline: its last run (status, mode, when, how long, a link to the Airflow run), rows in / out /
quarantined over its last runs as a small chart, backlog, freshness colored against the spec's thresholds,
the table's Delta version, and links to the DAG and to the query of its quarantine table. The data is
:func:`sluice.operations.overview.overview` (the ledger read with delta-rs, the checkpoints and listings: no JVM); the
page is plain HTML with inline SVG, rendered here: nothing is fetched from the internet. ``/sluice/api``
gives the same as JSON.

The page requires a signed-in Airflow user, as the UI does (Airflow does not authenticate a plugin's FastAPI
app by itself).
"""

from __future__ import annotations

import html
from typing import Any

from fastapi import Depends, FastAPI
from fastapi.responses import HTMLResponse

from sluice.operations.backlog import describe
from sluice.operations.overview import overview
from sluice.settings import load_settings

COLORS = {"fresh": "#2e7d4f", "warn": "#b7791f", "error": "#c0392b", None: "#6b7280"}
STATUS_COLORS = {"succeeded": "#2e7d4f", "failed": "#c0392b"}
BAR_COLORS = (("input_rows", "#60a5fa", "rows in"), ("output_rows", "#2e7d4f", "rows out"),
              ("quarantined_rows", "#c0392b", "quarantined"))


def _signed_in():
    """Airflow's own check of the signed-in user (its JWT, from the UI's cookie), where Airflow has it."""
    try:
        from airflow.api_fastapi.core_api.security import requires_authenticated
    except ImportError:  # pragma: no cover - an Airflow without it
        return []
    return [Depends(requires_authenticated())]


def create_app(*, authenticated: bool = True) -> FastAPI:
    app = FastAPI(title="sluice pipelines", docs_url=None, redoc_url=None, openapi_url=None)
    guard = _signed_in() if authenticated else []

    @app.get("/api", dependencies=guard)
    def api() -> dict[str, Any]:
        return overview(load_settings())

    @app.get("/", response_class=HTMLResponse, dependencies=guard)
    def page() -> str:
        return render(overview(load_settings()))

    return app


def render(data: dict[str, Any]) -> str:
    rows = "\n".join(_row(p) for p in data["pipelines"]) or '<tr><td colspan="8">no pipelines</td></tr>'
    errors = "".join(f"<li>{_e(e)}</li>" for e in data["errors"])
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>sluice pipelines</title>
<style>
body {{ font: 14px/1.4 system-ui, sans-serif; margin: 16px; color: #111827; }}
table {{ border-collapse: collapse; width: 100%; }}
th, td {{ border-bottom: 1px solid #e5e7eb; padding: 6px 8px; text-align: left; vertical-align: top; }}
th {{ background: #f3f4f6; font-weight: 600; }}
.badge {{ color: white; border-radius: 4px; padding: 1px 6px; font-size: 12px; }}
.muted {{ color: #6b7280; font-size: 12px; }}
a {{ color: #1d4ed8; }}
</style></head>
<body>
<h1>sluice pipelines</h1>
<p class="muted">{len(data["pipelines"])} pipeline(s); ledger {_e(data["ledger"])}; at {_e(data["at"])}</p>
{f'<ul class="errors">{errors}</ul>' if errors else ''}
<table id="pipelines">
<tr><th>pipeline</th><th>last run</th><th>rows (last runs)</th><th>backlog</th><th>freshness</th>
<th>Delta version</th><th>links</th></tr>
{rows}
</table>
</body></html>"""


def _row(p: dict[str, Any]) -> str:
    last = p["last_run"]
    if last:
        color = STATUS_COLORS.get(last["status"], "#6b7280")
        when = f'{_e(last["started_at"])} · {last["duration_s"] or 0:.0f} s · {_e(last["mode"])}'
        link = (f'<a target="_top" href="/dags/{_e(last["dag_id"])}/runs/{_e(last["dag_run_id"])}">Airflow run</a>'
                if last.get("dag_id") and last.get("dag_run_id") else f'run {_e(last["run_id"])}')
        counts = (f'<span class="counts" data-in="{last["input_rows"]}" data-out="{last["output_rows"]}" '
                  f'data-quarantined="{last["quarantined_rows"]}">{last["input_rows"]} in / {last["output_rows"]} out / '
                  f'{last["quarantined_rows"]} quarantined</span>')
        error = f'<div class="muted">{_e((last["error"] or "")[:200])}</div>' if last.get("error") else ""
        cell = (f'<span class="badge status" style="background:{color}">{_e(last["status"])}</span> {when}<br>'
                f'{link}<br>{counts}{error}')
    else:
        cell = '<span class="muted">no runs yet</span>'
    fresh = p["freshness"]
    level = fresh["level"] if fresh else None
    freshness = (f'<span class="badge freshness" data-level="{level}" style="background:{COLORS[level]}">{level}</span>'
                 f'<div class="muted">warn {_e(fresh["warn_after"])}'
                 f'{", error " + _e(fresh["error_after"]) if fresh["error_after"] else ""}</div>'
                 if fresh else '<span class="muted">not set</span>')
    query = f"SELECT * FROM delta.`{p['quarantine']}` ORDER BY quarantined_at DESC LIMIT 100"
    links = (f'<a target="_top" href="/dags/{_e(p["name"])}">DAG</a><br>'
             f'<details><summary>quarantine query</summary><code>{_e(query)}</code></details>')
    version = "-" if p["delta_version"] is None else str(p["delta_version"])
    name = f' <b class=table-name>{_e(p["table"])}</b>' if p.get("table") else ""
    return (f'<tr class="pipeline" data-name="{_e(p["name"])}"><td><b>{_e(p["name"])}</b>'
            f'<div class="muted">{_e(p["source"])}: {_e(p["reads"])}<br>→ {_e(p["sink"])}{name}</div></td>'
            f'<td>{cell}</td><td>{chart(p["runs"])}</td>'
            f'<td class="backlog">{_e(describe(p["backlog"]))}</td><td>{freshness}</td>'
            f'<td class="version">{version}</td><td>{links}</td></tr>')


def chart(runs: list[dict[str, Any]], width: int = 180, height: int = 48) -> str:
    """Rows in / out / quarantined of the runs (oldest left), as grouped bars in inline SVG."""
    if not runs:
        return '<span class="muted">-</span>'
    ordered = list(reversed(runs))
    top = max(max(r[key] for key, _, _ in BAR_COLORS) for r in ordered) or 1
    slot = width / len(ordered)
    bar = max(1.0, slot / 4)
    shapes = []
    for i, run in enumerate(ordered):
        for j, (key, color, label) in enumerate(BAR_COLORS):
            h = round((height - 2) * run[key] / top, 1)
            x = round(i * slot + j * bar + 1, 1)
            shapes.append(f'<rect x="{x}" y="{height - h}" width="{bar:.1f}" height="{h}" fill="{color}">'
                          f'<title>{_e(run["started_at"])}: {run[key]} {label}</title></rect>')
    return (f'<svg class="chart" width="{width}" height="{height}" role="img" '
            f'aria-label="rows in, out and quarantined over the last {len(ordered)} runs">{"".join(shapes)}</svg>')


def _e(value: Any) -> str:
    return html.escape("" if value is None else str(value))
