"""The pipelines page (sluice_airflow.page): every pipeline's last run, rows over its last runs, backlog,
freshness and Delta version, from the ledger and the checkpoints; the plugin that puts it in Airflow's UI."""

from __future__ import annotations

import json
import re
import subprocess
from datetime import UTC, datetime, timedelta

from fastapi.testclient import TestClient

from sluice.operations import ledger
from tests.e2e.conftest import BIN
from tests.helpers import orders_spec, write_spec
from tests.sluice.test_backlog import _land
from tests.sluice.test_ledger import summary


def _ago(**delta) -> str:
    return (datetime.now(UTC) - timedelta(**delta)).isoformat(timespec="seconds")


def _cells(page: str, name: str) -> str:
    found = re.search(rf'<tr class="pipeline" data-name="{name}">(.*?)</tr>', page, re.S)
    assert found, f"no row for {name}"
    return found.group(1)


def test_the_page_shows_each_pipelines_runs_backlog_freshness_and_version(lake):
    from sluice_airflow.page import create_app

    write_spec(lake.pipelines_dir, orders_spec(name="orders", freshness={"warn_after": "1h", "error_after": "1d"},
                                               sink={"path": "bronze/orders", "table": "bronze.orders"}))
    write_spec(lake.pipelines_dir, orders_spec(name="quiet", source={"format": "json", "path": "landing/quiet",
                                                                       "schema": "id BIGINT"}))
    path = str(lake.ledger_path)
    airflow = {"dag_id": "orders", "dag_run_id": "scheduled__2026-11-26", "try_number": 1}
    ledger.append_run(path, summary("r1", started=_ago(hours=3), input_rows=10, output_rows=10))
    ledger.append_run(path, summary("r2", started=_ago(hours=2), input_rows=12, output_rows=9, quarantined_rows=3,
                                    delta_version_before=2, delta_version_after=3, airflow=airflow))
    ledger.append_run(path, summary("dry", started=_ago(hours=1), dry_run=True, mode="dry_run"))  # not charted
    ledger.append_run(path, summary("optimize", started=_ago(minutes=30), mode="maintenance", output_rows=0))  # nor this
    _land(lake.lake_root / "landing" / "orders", "new.json", '{"id": 1}\n' * 3)

    client = TestClient(create_app(authenticated=False))
    page = client.get("/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    orders = _cells(page.text, "orders")
    assert 'data-in="12" data-out="9" data-quarantined="3"' in orders  # the last real run
    assert '<a target="_top" href="/dags/orders/runs/scheduled__2026-11-26">Airflow run</a>' in orders
    assert '<td class="version">3</td>' in orders
    assert '<td class="backlog">1 files (30 B) since ' in orders
    assert '<span class="badge freshness" data-level="warn"' in orders  # 2 h old, warn after 1 h
    assert orders.count("<rect ") == 2 * 3  # two real runs, three bars each
    assert "SELECT * FROM delta.`" + str(lake.lake_root / "_quarantine" / "orders") + "`" in orders
    assert f'→ {lake.lake_root / "bronze" / "orders"} <b class=table-name>bronze.orders</b>' in orders
    quiet = _cells(page.text, "quiet")
    assert "table-name" not in quiet  # no name: the folder only
    assert "no runs yet" in quiet and '<td class="version">-</td>' in quiet and "not set" in quiet

    data = client.get("/api").json()
    assert [p["name"] for p in data["pipelines"]] == ["orders", "quiet"]
    first = data["pipelines"][0]
    assert [r["run_id"] for r in first["runs"]] == ["r2", "r1"] and first["freshness"]["level"] == "warn"
    assert [p["table"] for p in data["pipelines"]] == ["bronze.orders", None]


def test_the_page_wants_a_signed_in_airflow_user(lake):
    from sluice_airflow.page import create_app

    assert TestClient(create_app()).get("/").status_code in (401, 403)


def test_the_plugin_mounts_the_page_and_puts_it_in_the_navigation():
    done = subprocess.run([str(BIN / "sluice"), "airflow", "plugins", "-o", "json"], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    [plugin] = [p for p in json.loads(done.stdout.strip().splitlines()[-1]) if p["name"] == "sluice"]
    assert plugin["source"] == "$PLUGINS_FOLDER/sluice_plugin.py"
    assert [(a["url_prefix"], a["name"]) for a in plugin["fastapi_apps"]] == [("/sluice", "sluice pipelines")]
    assert [(v["name"], v["href"], v["url_route"]) for v in plugin["external_views"]] == [("sluice", "sluice/", "sluice")]
