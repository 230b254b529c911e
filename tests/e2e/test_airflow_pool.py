"""Three times as many pipelines as the sluice pool has slots, due at the same minute, on a running Airflow
(`airflow standalone`) whose parallelism is above the pool's slots: Airflow's own admission control (the pool
every sluice task takes a slot of) never lets more spark-submits run at once than the pool's slots, the slots
are used side by side, and every run succeeds. (It was twenty pipelines, ten rounds of the two slots: three
rounds assert the same, in a third of the spark-submits; a fleet of twenty is measured in make bench P8.)"""

from __future__ import annotations

from datetime import datetime
from urllib.parse import quote

import pytest

from sluice.operations.ledger import latest_runs
from tests.e2e.conftest import wait_for
from tests.e2e.live_airflow import Api, airflow_standalone
from tests.helpers import orders_spec, write_spec

SLOTS = 2  # the suite's SLUICE_POOL_SLOTS (tests/conftest.py): the pool the migrated DB was created with
FLEET = [f"fleet_{n:02d}" for n in range(3 * SLOTS)]


def most_at_once(spans: list[tuple[datetime, datetime]]) -> int:
    """The most spans that overlap at one moment (one ending as another starts does not count)."""
    edges = sorted([(start, 1) for start, _ in spans] + [(end, -1) for _, end in spans], key=lambda e: (e[0], e[1]))
    running = most = 0
    for _, step in edges:
        running += step
        most = max(most, running)
    return most


def test_most_at_once_counts_overlaps_only():
    t = [datetime(2026, 11, 1, 0, 0, s) for s in range(6)]
    assert most_at_once([(t[0], t[2]), (t[1], t[3]), (t[2], t[4])]) == 2
    assert most_at_once([(t[0], t[5]), (t[1], t[2]), (t[1], t[3])]) == 3
    assert most_at_once([(t[0], t[1]), (t[1], t[2])]) == 1


@pytest.mark.timeout(1200)  # 6 spark-submits, two at a time
def test_a_fleet_due_at_once_runs_no_more_spark_submits_at_once_than_the_pool_has_slots(lake, tmp_path, airflow_db):
    # Airflow's parallelism well above the pool: only the pool holds the spark-submits back
    with airflow_standalone(tmp_path, airflow_db, {"AIRFLOW__CORE__PARALLELISM": "16",
                                                   "AIRFLOW__CORE__MAX_ACTIVE_TASKS_PER_DAG": "16"}) as (env, log):
        api = wait_for("the Airflow API", lambda: Api.connect(env), 300, log, every=2)
        pool = wait_for("the sluice pool", lambda: api.poll("/api/v2/pools/sluice"), 120, log)
        assert pool["slots"] == SLOTS, pool
        # the specs land once Airflow answers: the DAG processor's next parse makes the fleet's DAGs at once, and
        # their runs start on a running Airflow (one queued while its API starts fails and waits for its retry)
        for n, name in enumerate(FLEET):
            (lake.lake_root / "landing" / name).mkdir(parents=True)  # nothing landed: each run a driver's start
            write_spec(lake.pipelines_dir, orders_spec(name=name, schedule="@daily", priority=1 + n % 3,
                                                       source={**orders_spec()["source"], "path": f"landing/{name}"},
                                                       sink={"path": name}))

        def finished():
            found = {}
            for name in FLEET:
                runs = (api.poll(f"/api/v2/dags/{name}/dagRuns", not_yet_codes=(404,)) or {}).get("dag_runs") or []
                if not runs or runs[0]["state"] not in ("success", "failed"):
                    return None
                found[name] = runs
            return found

        # each DAG's scheduled run of its latest day (catchup off) is due as soon as the DAG is parsed
        runs = wait_for("the fleet's scheduled runs to finish", finished, 900, log, every=5)
        assert {name: [r["state"] for r in found] for name, found in runs.items()} == {n: ["success"] for n in FLEET}
        spans = []
        for name, (run,) in runs.items():
            task = api.get(f"/api/v2/dags/{name}/dagRuns/{quote(run['dag_run_id'], safe='')}/taskInstances/ingest")
            assert task["pool"] == "sluice", task
            spans.append((datetime.fromisoformat(task["start_date"]), datetime.fromisoformat(task["end_date"])))
    # never more than the pool's slots at once, and the slots were used side by side
    assert most_at_once(spans) == SLOTS, sorted(spans)
    # every run was its pipeline's driver, recorded as it ended
    for name in FLEET:
        (ran,) = latest_runs(str(lake.ledger_path), name)
        assert (ran["status"], ran["mode"], ran["input_rows"], ran["dag_id"]) == ("succeeded", "incremental", 0, name), ran


def test_the_pool_is_created_where_it_is_missing_and_keeps_the_slots_it_was_given(airflow_db, tmp_path, monkeypatch):
    import shutil
    import sqlite3
    import sys
    from pathlib import Path

    from sluice.settings import load_settings
    from sluice_cli.airflow import ensure_pool

    home = tmp_path / "airflow-home"
    home.mkdir()
    shutil.copyfile(airflow_db, home / "airflow.db")
    monkeypatch.setenv("SLUICE_AIRFLOW_HOME", str(home))
    monkeypatch.setenv("AIRFLOW_HOME", str(home))
    monkeypatch.setenv("SLUICE_POOL_SLOTS", "5")

    def slots() -> list[int]:
        with sqlite3.connect(home / "airflow.db") as db:
            return [n for (n,) in db.execute("SELECT slots FROM slot_pool WHERE pool = 'sluice'")]

    assert slots() == [SLOTS]  # made with the DB (`sluice airflow db migrate`, the airflow_db fixture)
    with sqlite3.connect(home / "airflow.db") as db:  # a DB migrated by plain `airflow db migrate`
        db.execute("DELETE FROM slot_pool WHERE pool = 'sluice'")
    airflow = str(Path(sys.executable).parent / "airflow")
    ensure_pool(airflow, load_settings())
    assert slots() == [5]
    with sqlite3.connect(home / "airflow.db") as db:  # an operator resized it
        db.execute("UPDATE slot_pool SET slots = 7 WHERE pool = 'sluice'")
    ensure_pool(airflow, load_settings())
    assert slots() == [7]
