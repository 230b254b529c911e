"""Operating pipelines from Airflow (real `airflow dags test` runs): the trigger form's params, backfill runs,
and a bronze -> silver -> gold chain whose tables are Assets (an event only when a run wrote rows), whose
OpenLineage events (Airflow's provider, its file transport) name the landing folder, the tables and the
quarantine tables with their row counts, and link the chain on the bronze table."""

from __future__ import annotations

import json
from datetime import date, datetime
from pathlib import Path

from tests.e2e.conftest import sluice
from tests.e2e.test_airflow import summary_of
from tests.helpers import tree_digest, write_lines, write_spec
from tests.spark_jobs.test_chain import BRONZE, GOLD, SILVER, order


def asset_events(name: str) -> int:
    return len(asset_event_extras(name))


def asset_event_extras(name: str) -> list[dict]:
    """The ``extra`` of each Asset event of ``name``, oldest first."""
    from airflow.models.asset import AssetEvent, AssetModel
    from airflow.utils.session import create_session

    with create_session() as session:
        return [event.extra for event in
                session.query(AssetEvent).join(AssetModel, AssetEvent.asset_id == AssetModel.id)
                .filter(AssetModel.name == name).order_by(AssetEvent.id)]


def dags_test(dag_id: str, conf: dict | None = None):
    args = ["airflow", "dags", "test", dag_id] + (["--conf", json.dumps(conf)] if conf else [])
    done = sluice(*args)
    return done, done.stdout + done.stderr


def chain_specs(lake, tmp_path: Path, prefix: str = "af") -> None:
    """bronze -> silver -> gold as ``<prefix>_bronze`` ..., reading ``landing/<prefix>``. The test run shares one
    Airflow database: a test of its own DAG runs and Asset events gives its own prefix."""
    regions = tmp_path / "regions.csv"
    regions.write_text("customer,region\nann,north\nbob,south\n", encoding="utf-8")
    bronze = {**BRONZE, "name": f"{prefix}_bronze", "schedule": "@daily",
              "source": {**BRONZE["source"], "path": f"landing/{prefix}"},
              "transform": {"sql": "SELECT *, to_date(ts) AS day FROM source"},
              "sink": {"partition_by": ["day"]},
              "backfill": {"column": "day", "path": f"landing/{prefix}/dt={{{{ ds }}}}"}}
    silver = json.loads(json.dumps(SILVER).replace("REGIONS", str(regions))
                        .replace('"bronze"', f'"{prefix}_bronze"'))
    silver["name"] = f"{prefix}_silver"
    gold = json.loads(json.dumps(GOLD).replace('"silver"', f'"{prefix}_silver"'))
    gold["name"] = f"{prefix}_gold"
    for data in (bronze, silver, gold):
        write_spec(lake.pipelines_dir, data)


def _first_completes(events_file: Path) -> dict[str, dict]:
    """The first COMPLETE event with inputs of each job: a job's first run, by job name."""
    events = [json.loads(line) for line in events_file.read_text(encoding="utf-8").splitlines() if line.strip()]
    found: dict[str, dict] = {}
    for event in events:
        if event.get("eventType") == "COMPLETE" and "inputs" in event:
            found.setdefault(event["job"]["name"], event)
    return found


def test_chain_runs_through_airflow_with_asset_events_only_for_new_rows_and_lineage(lake, spark, airflow_db,
                                                                                    monkeypatch, tmp_path,
                                                                                    shared_driver):
    events_file = tmp_path / "lineage.jsonl"
    monkeypatch.setenv("AIRFLOW__OPENLINEAGE__TRANSPORT", json.dumps(
        {"type": "file", "log_file_path": str(events_file), "append": True}))
    monkeypatch.setenv("AIRFLOW__OPENLINEAGE__NAMESPACE", "sluice-test")
    chain_specs(lake, tmp_path)
    landing = lake.lake_root / "landing" / "af"
    write_lines(landing / "dt=2026-11-01" / "a.json", [
        order(1, "2026-11-01T09:00:00Z", "ann", 10.0), order(2, "2026-11-01T10:00:00Z", "bob", 20.0),
        order(2, "2026-11-01T10:00:00Z", "bob", 20.0), order(3, "2026-11-01T11:00:00Z", "cid", 5.0),
        '{"id": 9, "ts": "not a time"}'])
    write_lines(landing / "dt=2026-11-02" / "a.json", [
        order(4, "2026-11-02T08:00:00Z", "ann", 7.5), order(5, "2026-11-02T23:30:00Z", "bob", 1.0)])

    done, output = dags_test("af_bronze")
    assert done.returncode == 0, output[-4000:]
    first = summary_of(output)
    assert first["output_rows"] == 6
    # the event carries the facts of the change: the run, the Delta versions written, the rows
    [extra] = asset_event_extras("sluice.af_bronze")
    assert extra == {"run_id": first["run_id"], "dag_run_id": first["airflow"]["dag_run_id"],
                     "delta_version": first["delta_version_after"],
                     "delta_versions": [0, first["delta_version_after"]], "rows": 6, "quarantined_rows": 1}
    done, output = dags_test("af_bronze")  # nothing new: the task succeeds, and wakes nobody
    assert done.returncode == 0, output[-4000:]
    idle = summary_of(output)
    assert idle["output_rows"] == 0
    # the task proved it idle and started no spark-submit (sluice.operations.idle); its XCom is the summary
    assert (idle["idle_run"]["driver_started"], idle["airflow"]["dag_id"]) == (False, "af_bronze")
    assert "spark_submit" not in idle["phases_s"]
    assert "no new rows in the table: no Asset event for sluice.af_bronze" in output
    assert asset_events("sluice.af_bronze") == 1

    for dag_id in ("af_silver", "af_gold"):
        done, output = dags_test(dag_id)
        assert done.returncode == 0, output[-4000:]
    assert asset_events("sluice.af_silver") == 1 and asset_events("sluice.af_gold") == 1
    gold = spark.read.format("delta").load(str(lake.lake_root / "af_gold"))
    day1 = datetime(2026, 11, 1)
    assert sorted(tuple(r) for r in gold.collect()) == [
        (day1, "north", 1, 10.0), (day1, "south", 1, 20.0), (day1, "unknown", 1, 5.0)]

    # the lineage of the chain's first runs (this test holds what test_lineage.py held: one chain, two uses)
    completes = _first_completes(events_file)
    bronze, silver = completes["af_bronze.ingest"], completes["af_silver.ingest"]
    bronze_table, quarantine = str(lake.lake_root / "af_bronze"), str(lake.lake_root / "_quarantine" / "af_bronze")
    assert [(i["namespace"], i["name"]) for i in bronze["inputs"]] == [("file", str(landing))]
    assert bronze["inputs"][0]["inputFacets"]["inputStatistics"]["rowCount"] == 7
    outputs = {o["name"]: o for o in bronze["outputs"]}
    assert sorted(outputs) == sorted([bronze_table, quarantine])
    assert outputs[bronze_table]["outputFacets"]["outputStatistics"]["rowCount"] == 6
    assert outputs[quarantine]["outputFacets"]["outputStatistics"]["rowCount"] == 1
    assert outputs[bronze_table]["facets"]["version"]["datasetVersion"] == "0"  # batch 0 created the table
    assert "day" in [f["name"] for f in outputs[bronze_table]["facets"]["schema"]["fields"]]
    assert bronze["job"]["facets"]["sql"]["query"] == "SELECT *, to_date(ts) AS day FROM source"
    # the chain: silver reads the very dataset bronze wrote
    assert ("file", bronze_table) in [(i["namespace"], i["name"]) for i in silver["inputs"]]


def test_params_are_validated_before_spark_and_a_backfill_rebuilds_its_days(lake, spark, airflow_db, tmp_path,
                                                                            shared_driver):
    chain_specs(lake, tmp_path)
    landing = lake.lake_root / "landing" / "af"
    write_lines(landing / "dt=2026-11-01" / "a.json", [order(1, "2026-11-01T09:00:00Z", "ann", 10.0)])
    write_lines(landing / "dt=2026-11-02" / "a.json", [order(2, "2026-11-02T09:00:00Z", "bob", 20.0)])

    done, output = dags_test("af_bronze", {"mode": "backfill", "backfill_from": "2026-11-02"})
    assert done.returncode != 0
    assert "af_bronze: param backfill_to: required too; a backfill range has a first and a last day" in output, output
    before = output.split("param backfill_to")[0].split("Executing")[-1]
    assert "spark-submit" not in before and "host driver" not in before  # refused before any driver
    # (the params' other rules reach the task the same way: tests/sluice/test_run_request.py holds each message)

    done, output = dags_test("af_bronze", {"max_files_per_trigger": 1})  # two micro-batches of one file
    assert done.returncode == 0, output[-4000:]
    assert summary_of(output)["batches"] == 2
    checkpoint = Path(summary_of(output)["checkpoint"])
    before = tree_digest(checkpoint)
    table = str(lake.lake_root / "af_bronze")

    backfill = {"mode": "backfill", "backfill_from": "2026-11-02", "backfill_to": "2026-11-02"}
    done, output = dags_test("af_bronze", backfill)
    assert done.returncode == 0, output[-4000:]
    summary = summary_of(output)
    assert (summary["mode"], summary["backfill"]["slice"], summary["output_rows"]) == (
        "backfill", "2026-11-02..2026-11-02", 1)
    # the day rebuilt, the other day as it was, the checkpoint untouched (that the same backfill again changes
    # nothing is asserted in-process: tests/spark_jobs/test_backfill.py, test_corrections.py)
    assert sorted((r.id, r.day) for r in spark.read.format("delta").load(table).collect()) == [
        (1, date(2026, 11, 1)), (2, date(2026, 11, 2))]
    assert tree_digest(checkpoint) == before
