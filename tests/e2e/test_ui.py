"""The Airflow UI, driven like a person would: Debian's Chromium (Playwright with the system browser, no
browser download) against a running `airflow standalone`. Log in, open a pipeline's DAG page, trigger it with
the params form -- a dry run first, then an incremental run --, wait for success, read the run summary in
the task's XCom tab. The downstream pipeline, scheduled on the upstream table's Asset, runs by itself after
the incremental run and only then (the dry run wrote nothing, so it emitted no Asset event).

Screenshots are kept in var/test-artifacts/ui/ (SLUICE_TEST_ARTIFACTS to put them elsewhere)."""

from __future__ import annotations

import json
import os
import re
import shutil
import time
from pathlib import Path
from urllib.parse import quote

import pytest

from tests.e2e.conftest import wait_for
from tests.e2e.live_airflow import Api, airflow_standalone, standalone_credentials
from tests.helpers import (
    delta_version,
    files_under,
    new_files_since,
    orders_spec,
    tree_digest,
    write_lines,
    write_orders,
    write_spec,
)

PROJECT = Path(__file__).resolve().parents[2]
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"


@pytest.fixture
def artifacts() -> Path:
    folder = Path(os.environ.get("SLUICE_TEST_ARTIFACTS") or PROJECT / "var" / "test-artifacts") / "ui"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.fixture
def browser():
    from playwright.sync_api import sync_playwright

    assert Path(CHROMIUM).exists(), "Chromium is missing: `make install` installs Debian's chromium package"
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield chromium
        chromium.close()


def run_from_the_form(page, api: Api, log: Path, dag_id: str, mode: str, screenshot: Path) -> dict:
    """Open the DAG page, click Trigger, pick the run mode in the params form, submit; wait for the run to
    succeed; its run summary, read in the task's XCom tab (saved as ``screenshot``)."""
    base = api.base
    page.goto(f"{base}/dags/{dag_id}")
    page.get_by_role("button", name="Trigger").first.click()
    dialog = page.get_by_role("dialog")
    dialog.get_by_text("Run Parameters").wait_for()
    if mode != "incremental":  # the form's default
        dialog.get_by_role("combobox").first.click()
        page.get_by_role("option", name=mode, exact=True).click()
    dialog.get_by_text(mode, exact=True).wait_for()
    dialog.get_by_role("button", name="Trigger").last.click()
    # the UI opens the new run's page, which shows its state once it is done
    page.wait_for_url(f"{base}/dags/{dag_id}/runs/**")
    run_id = page.url.split("/runs/", 1)[1]
    assert _wait_for_run(api, dag_id, run_id, log) == "success"
    page.reload()
    page.get_by_text("Success").first.wait_for()
    summary = _summary_in_the_xcom_tab(page, base, dag_id, run_id)
    page.screenshot(path=str(screenshot), full_page=True)
    return summary


def test_trigger_a_pipeline_from_the_ui_form_and_read_its_summary(lake, spark, browser, artifacts, tmp_path,
                                                                airflow_db, shared_driver):
    # the tasks hand their runs to the host's shared driver (SLUICE_SHARED_DRIVER=host, warm from the tests
    # before): the dry run, the run and the downstream run in one JVM (a task's own spark-submit is the other
    # Airflow tests')
    # Given an upstream pipeline with 40 good orders and a bad one, and a downstream pipeline on its Asset
    write_spec(lake.pipelines_dir, orders_spec(name="ui_orders"))
    write_spec(lake.pipelines_dir, {"name": "ui_orders_copy", "schedule": {"asset": "ui_orders"},
                                    "source": {"format": "delta", "pipeline": "ui_orders"},
                                    "sink": {"path": "silver/ui_orders"}})
    landing = lake.lake_root / "landing" / "orders"
    write_orders(landing, "a.json", range(40))
    write_lines(landing / "bad.json", ['{"id": 40, "amount": "a lot"}'])
    with airflow_standalone(tmp_path, airflow_db) as (env, log):
        base = f"http://127.0.0.1:{env['AIRFLOW__API__PORT']}"
        api = wait_for("the Airflow API server's login", lambda: Api.connect(env), 300, log)
        wait_for("the DAGs of both specs", lambda: _dag_ids(api) >= {"ui_orders", "ui_orders_copy"}, 300, log)
        context = browser.new_context(viewport={"width": 1400, "height": 1000},
                                      permissions=["clipboard-read", "clipboard-write"])
        # a busy machine (the other test worker's JVMs) can take tens of seconds to render a dialog: every wait
        # of the page fails only at this deadline, not at Playwright's 30 s
        context.set_default_timeout(180_000)
        page = context.new_page()

        # When a person logs in
        page.goto(base + "/")
        username, password = standalone_credentials(env)
        page.get_by_label("Username").fill(username)
        page.get_by_label("Password").fill(password)
        page.get_by_role("button", name="Sign in").click()
        page.wait_for_url(base + "/")
        page.goto(f"{base}/dags/ui_orders")
        page.get_by_text("SluicePipelineOperator").or_(page.get_by_text("ingest", exact=True)).first.wait_for()
        page.wait_for_load_state("networkidle")
        page.screenshot(path=str(artifacts / "1-dag-page.png"))

        # and triggers a dry run from the params form
        checkpoint = lake.checkpoint_root / "ui_orders"
        before = tree_digest(checkpoint)
        assert before == {} and not checkpoint.exists()  # the pipeline never ran: it has no checkpoint yet
        lake_files = files_under([lake.lake_root])
        summary = run_from_the_form(page, api, log, "ui_orders", "dry_run", artifacts / "2-dry-run-summary.png")
        # Then the summary says what the next run would ingest, and nothing was written
        assert (summary["mode"], summary["dry_run"], summary["status"]) == ("dry_run", True, "succeeded")
        shared = summary["shared_driver"]
        assert shared["driver"] == "host"
        assert (summary["input_rows"], summary["output_rows"], summary["quarantined_rows"]) == (41, 40, 1)
        # still no checkpoint (the checkpoint root's _locks/ are not compared: the daily sluice_maintenance DAG
        # starts with Airflow and takes each pipeline's lock meanwhile)
        assert tree_digest(checkpoint) == before and not checkpoint.exists()
        # every run has its line in the ledger, a dry run too
        assert new_files_since([lake.lake_root], lake_files, expected=(lake.ledger_path,)) == []
        assert delta_version(lake.lake_root / "bronze" / "orders") is None

        # When the incremental run is triggered the same way
        summary = run_from_the_form(page, api, log, "ui_orders", "incremental",
                                    artifacts / "3-incremental-summary.png")
        assert (summary["mode"], summary["dry_run"], summary["status"]) == ("incremental", False, "succeeded")
        assert summary["shared_driver"] == {**shared, "position": shared["position"] + 1}
        assert (summary["input_rows"], summary["output_rows"], summary["quarantined_rows"]) == (41, 40, 1)
        assert {"offsets/0", "commits/0"} <= set(tree_digest(checkpoint))  # this run wrote the checkpoint
        assert delta_version(lake.lake_root / "bronze" / "orders") == summary["delta_version_after"] == 0

        # Then the downstream pipeline ran because of the table's Asset event -- once, not after the dry run
        copy_runs = wait_for("the Asset-triggered run of ui_orders_copy", lambda: _finished_runs(
            api, "ui_orders_copy"), 600, log)
        assert [(r["run_type"], r["state"]) for r in copy_runs] == [("asset_triggered", "success")], copy_runs
        copy_ran = time.monotonic()
        page.goto(f"{base}/dags/ui_orders_copy")
        page.get_by_text("sluice.ui_orders", exact=True).first.wait_for()  # its schedule: the upstream Asset
        page.get_by_text("ingest", exact=True).first.wait_for()
        page.wait_for_load_state("networkidle")
        page.screenshot(path=str(artifacts / "4-downstream-dag.png"))

        # And "sluice" in the navigation shows every pipeline at a glance (the plugin's page, in the UI)
        page.goto(f"{base}/plugin/sluice")
        frame = page.frame_locator("iframe")
        orders = frame.locator('tr.pipeline[data-name="ui_orders"]')
        orders.wait_for(timeout=60_000)
        counts = orders.locator("span.counts")  # the last real run: the incremental one, with the bad order
        assert (counts.get_attribute("data-in"), counts.get_attribute("data-out"),
                counts.get_attribute("data-quarantined")) == ("41", "40", "1")
        assert orders.locator("span.status").inner_text() == "succeeded"
        assert orders.locator("td.version").inner_text() == "0"
        assert orders.locator("td.backlog").inner_text().startswith("0 files")
        assert orders.locator("svg.chart rect").count() == 3  # one real run charted (the dry run is not)
        copy = frame.locator('tr.pipeline[data-name="ui_orders_copy"]')
        assert copy.locator("span.counts").get_attribute("data-out") == "40"
        assert copy.locator("td.backlog").inner_text().startswith("0 version")
        page.wait_for_load_state("networkidle")
        page.screenshot(path=str(artifacts / "5-pipelines-page.png"))
        # its JSON, for scripts, wants the same signed-in user
        assert api.get("/sluice/api")["pipelines"][0]["name"] == "ui_orders"
        # still one run of the downstream pipeline: a second, unwanted one would have been created within 10 s
        # of the first (the page's checks above take about that long; the rest is waited out)
        time.sleep(max(0.0, 10 - (time.monotonic() - copy_ran)))
        assert len(api.get("/api/v2/dags/ui_orders_copy/dagRuns")["dag_runs"]) == 1

    bronze = spark.read.format("delta").load(str(lake.lake_root / "bronze" / "orders"))
    silver = spark.read.format("delta").load(str(lake.lake_root / "silver" / "ui_orders"))
    assert sorted(r.id for r in bronze.collect()) == list(range(40))
    assert sorted(r.id for r in silver.collect()) == list(range(40))


def _dag_ids(api: Api) -> set[str]:
    """The DAGs the API lists (none while it answers like a half-started server)."""
    dags = api.poll("/api/v2/dags?limit=100")
    return {d["dag_id"] for d in dags["dags"]} if dags else set()


def _wait_for_run(api: Api, dag_id: str, run_id: str, log: Path) -> str:
    path = f"/api/v2/dags/{dag_id}/dagRuns/{quote(run_id, safe='')}"

    def finished_state() -> str | None:
        run = api.poll(path)
        return run["state"] if run and run["state"] in ("success", "failed") else None

    return wait_for(f"{dag_id} run {run_id}", finished_state, 600, log)


def _finished_runs(api: Api, dag_id: str) -> list[dict] | None:
    runs = (api.poll(f"/api/v2/dags/{dag_id}/dagRuns") or {}).get("dag_runs")
    return runs if runs and all(r["state"] in ("success", "failed") for r in runs) else None


def _summary_in_the_xcom_tab(page, base: str, dag_id: str, run_id: str) -> dict:
    """The ingest task's XCom tab: the run summary is its return value, shown as JSON; the Copy button next to
    it puts the whole value on the clipboard (the view scrolls past the first keys)."""
    page.goto(f"{base}/dags/{dag_id}/runs/{quote(run_id, safe='')}/tasks/ingest/xcom")
    row = page.get_by_role("row").filter(has_text="return_value")
    row.wait_for()
    page.wait_for_load_state("networkidle")
    expand = page.get_by_role("button", name=re.compile("expand", re.I))
    if expand.count():  # the value shows collapsed: open it as a person would
        expand.first.click()
    row.get_by_text('"output_rows"').wait_for()
    row.get_by_role("button", name="Copy").click()
    return json.loads(page.evaluate("navigator.clipboard.readText()"))

