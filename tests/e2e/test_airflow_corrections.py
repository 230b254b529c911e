"""A backfill upstream, on a running Airflow (`airflow standalone`, the scheduler creating runs): bronze's
transform is fixed and two days are backfilled through the REST call the UI's backfill dialog makes; the
bronze table's Asset events start silver, silver's start gold, and every one of those runs succeeds and
rebuilds the two days -- checked against values computed by hand, the day outside the slice unchanged. (That
the same backfill again leaves every table identical is asserted in-process, on the same chain, by
tests/spark_jobs/test_corrections.py: here it cost a third of the test, ~4 min, for no path of its own. The
chain's first runs are made in-process before Airflow starts: the scheduler's run of bronze then finds nothing
new and wakes nobody, and every run Airflow makes after it is the correction's.)"""

from __future__ import annotations

import contextlib
import json
import time

import pytest

from tests.e2e.conftest import wait_for
from tests.e2e.live_airflow import Api, airflow_standalone
from tests.helpers import ran_here, write_spec
from tests.spark_jobs.test_corrections import (
    BRONZE,
    GOLD,
    SILVER,
    TIMES_TEN,
    land,
    order,
)

NAMES = {"bronze": "afc_bronze", "silver": "afc_silver", "gold": "afc_gold"}
INITIAL_GOLD = [(1, "north", 1, 10.0), (1, "south", 1, 20.0), (2, "north", 1, 7.0)]
FIXED_SILVER = [(1, 1, "north", 100.0), (2, 1, "south", 200.0), (3, 2, "north", 70.0), (4, 3, "south", 2.0)]
FIXED_GOLD = [(1, "north", 1, 100.0), (1, "south", 1, 200.0), (2, "north", 1, 70.0)]


def renamed(data: dict) -> dict:
    text = json.dumps(data)
    for old, new in NAMES.items():
        text = text.replace(f'"{old}"', f'"{new}"')
    return json.loads(text)


@pytest.fixture
def standalone(lake, tmp_path, airflow_db):
    """Starts `airflow standalone` when the test calls it (after its in-process set-up); stopped at the end."""
    with contextlib.ExitStack() as stack:
        # the scheduler creates runs: scheduled and Asset-triggered
        yield lambda: stack.enter_context(airflow_standalone(tmp_path, airflow_db))


def dag_runs(api: Api, dag_id: str) -> list[dict] | None:
    answer = api.poll(f"/api/v2/dags/{dag_id}/dagRuns?limit=100", not_yet_codes=(404,))
    return None if answer is None else answer.get("dag_runs", [])


@pytest.mark.timeout(1800)  # about 7 spark-submits (scheduled, backfill and Asset-triggered runs): past 900 s when busy
def test_an_airflow_backfill_upstream_is_rebuilt_down_the_chain_by_asset_triggered_runs(lake, spark, standalone,
                                                                                           tmp_path, shared_driver):
    # the tasks hand their runs to the host's shared driver (SLUICE_SHARED_DRIVER=host, warm from the tests
    # before): the scheduler's, the backfill's and the Asset-triggered runs of the three pipelines in one JVM
    # (the per-task spark-submit of these paths is test_airflow_chain.py's and test_airflow_backfill.py's)
    regions = tmp_path / "regions.csv"
    regions.write_text("customer,region\nann,north\nbob,south\n", encoding="utf-8")
    bronze = renamed({**BRONZE, "schedule": "@daily"})
    silver = renamed(json.loads(json.dumps(SILVER).replace("REGIONS", str(regions))))
    gold = renamed(GOLD)
    for data in (bronze, silver, gold):
        write_spec(lake.pipelines_dir, data)
    land(lake, 1, "a.json", [order(1, 1, 9, "ann", 10.0), order(2, 1, 10, "bob", 20.0)])
    land(lake, 2, "a.json", [order(3, 2, 9, "ann", 7.0)])
    land(lake, 3, "a.json", [order(4, 3, 5, "bob", 2.0)])  # the watermark passes 11-02's window
    # the chain's first runs, in-process, before Airflow starts (the runs the test is about are Airflow's)
    for name in NAMES.values():
        ran_here(spark, lake, name, run_id=f"set-up-{name}")
    # the specs land again once Airflow answers (as in test_airflow_pool.py): bronze's scheduled run, queued at
    # the first parse, would otherwise meet an execution API still starting, fail, and wait for its retry
    held = tmp_path / "held-specs"
    held.mkdir()
    for spec in lake.pipelines_dir.glob("*.yaml"):
        spec.rename(held / spec.name)
    env, log = standalone()

    def table(name: str) -> list[tuple]:
        path = lake.lake_root / name
        if not (path / "_delta_log").is_dir():
            return []
        rows = spark.read.format("delta").load(str(path)).collect()
        if name == NAMES["gold"]:
            return sorted((r.day.day, r.region, r.orders, r.revenue) for r in rows)
        return sorted((r.id, r.day.day, r.region, r.amount) for r in rows)

    api = wait_for("the Airflow API", lambda: Api.connect(env), 300, log, every=2)
    for spec in held.glob("*.yaml"):
        spec.rename(lake.pipelines_dir / spec.name)

    last: dict[str, object] = {}

    def settled(expected_gold: list[tuple], after: dict[str, set[str]] | None = None):
        """Every run of the three DAGs finished, gold holds what is expected, each DAG has a run not in
        ``after``, and the runs listed have not changed for 10 s (a later Asset event may start one more run)."""
        runs = {dag: dag_runs(api, dag) for dag in NAMES.values()}
        if any(r is None for r in runs.values()) or not runs[NAMES["bronze"]]:  # bronze's scheduled run is there
            return None
        if any(run["state"] not in ("success", "failed") for found in runs.values() for run in found):
            return None
        downstream = (NAMES["silver"], NAMES["gold"])  # a backfill of days done before reruns their runs
        if after is not None and any(not {r["dag_run_id"] for r in runs[dag]} - after[dag] for dag in downstream):
            return None
        if table(NAMES["gold"]) != expected_gold:
            return None
        seen = {dag: sorted(r["dag_run_id"] for r in found) for dag, found in runs.items()}
        if last.get("seen") != seen:
            last.update(seen=seen, since=time.monotonic())
        # unchanged for 10 s: an Asset event's run would have been created by then
        return runs if time.monotonic() - last["since"] >= 10 else None

    # the scheduler's own run of bronze (catchup off: the latest day) finds nothing new: no Asset event, silver
    # and gold do not run
    runs = wait_for("bronze's scheduled run", lambda: settled(INITIAL_GOLD), 900, log, every=3)
    assert all(run["state"] == "success" for found in runs.values() for run in found), runs
    assert [len(runs[NAMES[n]]) for n in ("bronze", "silver", "gold")] == [1, 0, 0], runs
    before = {dag: {run["dag_run_id"] for run in found} for dag, found in runs.items()}

    # the fix, and the REST call of the UI's backfill dialog for two days
    write_spec(lake.pipelines_dir, {**bronze, "transform": {"sql": TIMES_TEN}})
    body = {"dag_id": NAMES["bronze"], "from_date": "2026-11-01T00:00:00Z", "to_date": "2026-11-02T00:00:00Z",
            "reprocess_behavior": "completed", "max_active_runs": 10, "run_backwards": False, "dag_run_conf": {}}

    # the dialog asks the dry-run endpoint which runs it would create, then posts the backfill
    planned = api.post("/api/v2/backfills/dry_run", body)
    assert sorted(r["logical_date"][:10] for r in planned["backfills"]) == ["2026-11-01", "2026-11-02"], planned
    api.run_backfill(body, "the backfill to complete", 900, log)
    runs = wait_for("silver and gold to follow the backfill", lambda: settled(FIXED_GOLD, before), 900, log, every=3)
    new = {dag: [run for run in found if run["dag_run_id"] not in before[dag]] for dag, found in runs.items()}
    # every run succeeded; the backfill made one run per day, each day's Asset event started silver
    assert all(run["state"] == "success" for found in new.values() for run in found), new
    backfills = [r for r in runs[NAMES["bronze"]] if r["run_type"] == "backfill"]
    assert sorted(r["logical_date"][:10] for r in backfills) == ["2026-11-01", "2026-11-02"], runs
    assert all(r["state"] == "success" for r in backfills), runs
    assert new[NAMES["silver"]] and all(r["run_type"] == "asset_triggered" for r in new[NAMES["silver"]]), new
    assert new[NAMES["gold"]] and all(r["run_type"] == "asset_triggered" for r in new[NAMES["gold"]]), new
    assert table(NAMES["silver"]) == FIXED_SILVER  # day 3, outside the slice, unchanged
    assert table(NAMES["gold"]) == FIXED_GOLD

    # the Asset events carry the correction: bronze's its backfill's day, silver's the slices it rebuilt
    events = api.get("/api/v2/assets/events?limit=200")["asset_events"]
    extras = {(e.get("source_dag_id"), json.dumps((e.get("extra") or {}).get("backfill") or
                                                    (e.get("extra") or {}).get("rebuilt"))) for e in events}
    assert {(NAMES["bronze"], '"2026-11-01..2026-11-01"'), (NAMES["bronze"], '"2026-11-02..2026-11-02"')} <= extras
    assert any(dag == NAMES["silver"] and "2026-11-0" in slices for dag, slices in extras), extras
    # one driver ran them all: every run's summary (its XCom) names the same JVM, but a run the launcher proved
    # idle (nothing new since the pipeline's last run: sluice.operations.idle), which started no driver
    summaries = [api.run_summary(dag, run["dag_run_id"]) for dag, found in runs.items() for run in found]
    idle = [s for s in summaries if "idle_run" in s]
    assert all(s["input_rows"] == 0 and "shared_driver" not in s for s in idle), idle
    drivers = [s["shared_driver"] for s in summaries if "idle_run" not in s]
    assert len({(d["driver"], d["app_id"], d["pid"]) for d in drivers}) == 1, drivers
    # each run its own job: bronze's three, and one or more of silver and of gold
    assert len({d["position"] for d in drivers}) == len(drivers) >= 5 - len(idle), (drivers, idle)
