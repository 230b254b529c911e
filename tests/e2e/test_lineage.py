"""OpenLineage through Airflow's provider, with its file transport: the events of a bronze -> silver chain
(real `airflow dags test` runs) name the landing folder, the tables and the quarantine tables, and link the
chain on the bronze table."""

from __future__ import annotations

import json

from tests.e2e.test_airflow_chain import chain_specs, dags_test
from tests.helpers import write_lines
from tests.spark_jobs.test_chain import order


def _completes(events_file) -> dict[str, dict]:
    events = [json.loads(line) for line in events_file.read_text(encoding="utf-8").splitlines() if line.strip()]
    return {e["job"]["name"]: e for e in events if e.get("eventType") == "COMPLETE" and "inputs" in e}


def test_a_chains_lineage_links_its_tables_with_row_counts(lake, airflow_db, monkeypatch, tmp_path):
    events_file = tmp_path / "lineage.jsonl"
    monkeypatch.setenv("AIRFLOW__OPENLINEAGE__TRANSPORT", json.dumps(
        {"type": "file", "log_file_path": str(events_file), "append": True}))
    monkeypatch.setenv("AIRFLOW__OPENLINEAGE__NAMESPACE", "sluice-test")
    chain_specs(lake, tmp_path, prefix="ol")
    landing = lake.lake_root / "landing" / "ol"
    write_lines(landing / "dt=2026-11-01" / "a.json", [
        order(1, "2026-11-01T09:00:00Z", "ann", 10.0), order(2, "2026-11-01T10:00:00Z", "bob", 20.0),
        '{"id": 3, "ts": "not a time"}'])
    for dag_id in ("ol_bronze", "ol_silver"):
        done, output = dags_test(dag_id)
        assert done.returncode == 0, output[-4000:]

    completes = _completes(events_file)
    bronze, silver = completes["ol_bronze.ingest"], completes["ol_silver.ingest"]
    bronze_table, quarantine = str(lake.lake_root / "ol_bronze"), str(lake.lake_root / "_quarantine" / "ol_bronze")
    assert [(i["namespace"], i["name"]) for i in bronze["inputs"]] == [("file", str(landing))]
    assert bronze["inputs"][0]["inputFacets"]["inputStatistics"]["rowCount"] == 3
    outputs = {o["name"]: o for o in bronze["outputs"]}
    assert sorted(outputs) == sorted([bronze_table, quarantine])
    assert outputs[bronze_table]["outputFacets"]["outputStatistics"]["rowCount"] == 2
    assert outputs[quarantine]["outputFacets"]["outputStatistics"]["rowCount"] == 1
    assert outputs[bronze_table]["facets"]["version"]["datasetVersion"] == "0"  # batch 0 created the table
    assert "day" in [f["name"] for f in outputs[bronze_table]["facets"]["schema"]["fields"]]
    assert bronze["job"]["facets"]["sql"]["query"] == "SELECT *, to_date(ts) AS day FROM source"
    # the chain: silver reads the very dataset bronze wrote
    assert ("file", bronze_table) in [(i["namespace"], i["name"]) for i in silver["inputs"]]
