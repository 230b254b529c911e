"""Every spec gives a DAG; bad specs are import errors that hide nothing; parsing never imports PySpark."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path

import pytest
from airflow.dag_processing.dagbag import DagBag
from sluice_airflow.pipeline_operator import (
    SluiceMaintenanceOperator,
    SluicePipelineOperator,
)

from sluice.settings import load_settings
from sluice.spec import AssetSchedule, load_spec
from sluice.spec.catalog import spec_files
from tests.helpers import orders_spec, write_spec

PROJECT = Path(__file__).resolve().parents[2]
DAGS = PROJECT / "dags"
SAMPLE_SPECS = spec_files(PROJECT / "include" / "pipelines")


def dag_bag(monkeypatch, pipelines: Path) -> DagBag:
    monkeypatch.setenv("SLUICE_PIPELINES", str(pipelines))
    return DagBag(dag_folder=str(DAGS))


@pytest.fixture(scope="module")
def sample_bag():
    with pytest.MonkeyPatch.context() as mp:
        yield dag_bag(mp, PROJECT / "include" / "pipelines")


def test_sample_dags_import_without_errors(sample_bag):
    assert sample_bag.import_errors == {}
    assert sorted(sample_bag.dag_ids) == sorted([*(load_spec(p).name for p in SAMPLE_SPECS), "sluice_maintenance",
                                                 "sluice_freshness"])


def test_the_maintenance_dag_has_a_task_per_pipeline_that_wants_one(monkeypatch, tmp_path):
    write_spec(tmp_path, orders_spec(name="orders"))
    write_spec(tmp_path, orders_spec(name="clicks", maintenance={"zorder_by": ["customer"]}))
    write_spec(tmp_path, orders_spec(name="archive", maintenance={"enabled": False}))
    bag = dag_bag(monkeypatch, tmp_path)
    assert bag.import_errors == {}
    dag = bag.dags["sluice_maintenance"]
    assert [t.task_id for t in dag.tasks] == ["maintain_clicks", "maintain_orders"]
    assert all(isinstance(t, SluiceMaintenanceOperator) for t in dag.tasks)
    assert dag.get_task("maintain_orders").spec_path == str(tmp_path / "orders.yaml")
    assert dag.get_task("maintain_orders").application.endswith("spark_jobs/maintain.py")
    assert dag.schedule == "@daily" and dag.max_active_tasks == 1 and dag.catchup is False
    assert "`clicks`: OPTIMIZE ZORDER BY customer, VACUUM RETAIN 168 HOURS" in dag.doc_md
    monkeypatch.setenv("SLUICE_MAINTENANCE_SCHEDULE", "none")
    assert dag_bag(monkeypatch, tmp_path).dags["sluice_maintenance"].schedule is None


def test_the_freshness_dag_has_a_task_per_pipeline_with_a_freshness_section(monkeypatch, tmp_path):
    from sluice_airflow.freshness import SluiceFreshnessOperator

    write_spec(tmp_path, orders_spec(name="orders", freshness={"warn_after": "2h", "error_after": "6h"}))
    write_spec(tmp_path, orders_spec(name="clicks", freshness={"warn_after": "30m"}))
    write_spec(tmp_path, orders_spec(name="archive"))
    bag = dag_bag(monkeypatch, tmp_path)
    assert bag.import_errors == {}
    dag = bag.dags["sluice_freshness"]
    assert [t.task_id for t in dag.tasks] == ["freshness_clicks", "freshness_orders"]
    assert all(isinstance(t, SluiceFreshnessOperator) for t in dag.tasks)
    assert dag.get_task("freshness_orders").spec_path == str(tmp_path / "orders.yaml")
    assert dag.schedule == "*/15 * * * *" and dag.catchup is False
    assert "`orders`: warn after 2h, error after 6h" in dag.doc_md
    monkeypatch.setenv("SLUICE_FRESHNESS_SCHEDULE", "none")
    assert dag_bag(monkeypatch, tmp_path).dags["sluice_freshness"].schedule is None


@pytest.mark.parametrize("spec_path", SAMPLE_SPECS, ids=[str(p.relative_to(PROJECT)) for p in SAMPLE_SPECS])
def test_each_spec_gives_a_dag_with_one_ingest_task(sample_bag, spec_path):
    spec = load_spec(spec_path)
    dag = sample_bag.dags.get(spec.name)
    assert dag is not None, f"no DAG for {spec_path}"
    assert [t.task_id for t in dag.tasks] == ["ingest"]
    task = dag.get_task("ingest")
    assert isinstance(task, SluicePipelineOperator)
    assert task.spec_path == str(spec_path)
    assert dag.max_active_runs == 1
    assert dag.catchup is False
    assert "sluice" in dag.tags
    assert task.retries == spec.retries == 1
    if isinstance(spec.schedule, AssetSchedule):  # runs when the upstream pipelines' tables were updated
        assert sorted(a.name for a in dag.timetable.asset_condition.objects) == sorted(
            f"sluice.{n}" for n in spec.schedule.pipelines)
    elif spec.backfill is not None:  # each run has a day's data interval: the slice a backfill run rebuilds
        assert dag.schedule.__class__.__name__ == "CronDataIntervalTimetable"
        assert (dag.schedule.expression, str(dag.schedule.timezone)) == ("0 0 * * *", "UTC")
        assert spec.schedule == "@daily"
    else:
        assert dag.schedule == spec.schedule
    # its sink table is the task's outlet Asset
    assert [(a.name, a.uri, a.extra) for a in task.outlets] == [(
        f"sluice.{spec.name}", f"sluice://{spec.name}/",  # Airflow normalises the URI
        {"pipeline": spec.name, "table": Path(spec.sink_path(load_settings())).as_uri()})]
    # the "Trigger DAG" form: run mode, trigger, rate limits, backfill range, validated by their JSON schema
    assert dag.params.dump() == {"mode": "incremental", "trigger": spec.trigger, "max_files_per_trigger": None,
                                 "max_offsets_per_trigger": None, "backfill_from": None, "backfill_to": None}
    assert dag.params.get_param("mode").schema["enum"] == ["incremental", "dry_run", "backfill", "reset"]
    assert dag.params.get_param("backfill_from").schema == {
        "type": ["null", "string"], "format": "date", "title": "Backfill from (day)",
        "$schema": "http://json-schema.org/draft-07/schema#"}
    dag.check_cycle()


def test_bad_spec_is_an_import_error_and_does_not_hide_the_others(monkeypatch, tmp_path):
    write_spec(tmp_path, orders_spec(name="good_one"))
    write_spec(tmp_path, orders_spec(name="bad_one", sink={"mode": "upsert"}))
    bag = dag_bag(monkeypatch, tmp_path)
    assert sorted(bag.dag_ids) == ["good_one", "sluice_freshness", "sluice_maintenance"]
    assert list(bag.import_errors) == [str(DAGS / "sluice_spec_errors.py")]
    error = bag.import_errors[str(DAGS / "sluice_spec_errors.py")]
    assert "1 invalid pipeline spec(s)" in error
    assert "bad_one.yaml: sink.mode: 'upsert' is not allowed; use one of: append, complete" in error


def test_parsing_the_dags_folder_does_not_import_pyspark(tmp_path):
    # A fresh interpreter: the test session itself has PySpark loaded
    code = (
        "import json, sys\n"
        "from airflow.dag_processing.dagbag import DagBag\n"
        f"bag = DagBag(dag_folder={str(DAGS)!r})\n"
        "print(json.dumps({'dags': sorted(bag.dag_ids), 'errors': list(bag.import_errors),\n"
        "  'pyspark': sorted(m for m in sys.modules if m == 'pyspark' or m.startswith('pyspark.'))}))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                          env={**_env(), "SLUICE_PIPELINES": str(PROJECT / "include" / "pipelines")})
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["errors"] == []
    assert "orders_bronze" in result["dags"] and "sluice_maintenance" in result["dags"]
    assert result["pyspark"] == []


def _env() -> dict[str, str]:
    import os

    return dict(os.environ)


def test_the_trigger_form_rejects_values_its_schema_does_not_allow(sample_bag):
    from airflow.sdk.exceptions import ParamValidationError

    params = sample_bag.dags["orders_bronze"].params
    for name, value in (("mode", "full"), ("max_files_per_trigger", 0), ("max_files_per_trigger", "3"),
                        ("backfill_from", "1 Nov")):
        form = copy.deepcopy(params)
        with pytest.raises(ParamValidationError, match=f"Invalid input for param {name}"):
            form[name] = value  # the form's value, as the UI or the REST API sets it
            form.validate()
    form = copy.deepcopy(params)
    form.update({"mode": "backfill", "backfill_from": "2026-11-01", "backfill_to": "2026-11-03"})
    assert form.validate()["backfill_to"] == "2026-11-03"


def test_a_renamed_upstream_keeps_its_asset_for_readers_naming_it_by_either_name(monkeypatch, tmp_path):
    write_spec(tmp_path, orders_spec(name="bronze_new", previous_names=["bronze_one"]))
    for reader, names in (("silver_old", "bronze_one"), ("silver_new", "bronze_new")):
        write_spec(tmp_path, {"name": reader, "schedule": {"asset": names}, "sink": {"path": f"silver/{reader}"},
                              "source": {"format": "delta", "pipeline": names}})
    bag = dag_bag(monkeypatch, tmp_path)
    assert not bag.import_errors
    outlets = [a.name for a in bag.dags["bronze_new"].get_task("ingest").outlets]
    assert outlets == ["sluice.bronze_one"]  # the identity's asset: its event history goes on
    for reader in ("silver_old", "silver_new"):
        assert [a.name for a in bag.dags[reader].timetable.asset_condition.objects] == ["sluice.bronze_one"]


def test_a_chained_spec_naming_an_unknown_pipeline_is_an_import_error(monkeypatch, tmp_path):
    write_spec(tmp_path, orders_spec(name="bronze_one"))
    write_spec(tmp_path, {"name": "silver_one", "schedule": {"asset": "bronze_typo"},
                          "source": {"format": "delta", "pipeline": "bronze_one"}})
    bag = dag_bag(monkeypatch, tmp_path)
    assert sorted(bag.dag_ids) == ["bronze_one", "sluice_freshness", "sluice_maintenance"]
    error = bag.import_errors[str(DAGS / "sluice_spec_errors.py")]
    assert "silver_one.yaml: schedule.asset: names 'bronze_typo', which is not a valid pipeline in" in error


def test_every_spark_submit_task_takes_a_slot_of_the_sluice_pool_by_its_spec_priority(monkeypatch, tmp_path):
    write_spec(tmp_path, orders_spec(name="orders", priority=10))
    write_spec(tmp_path, orders_spec(name="clicks"))
    monkeypatch.setenv("SLUICE_AIRFLOW_POOL", "lake_drivers")
    bag = dag_bag(monkeypatch, tmp_path)
    assert bag.import_errors == {}
    ingest = {name: bag.dags[name].get_task("ingest") for name in ("orders", "clicks")}
    assert {name: (t.pool, t.priority_weight, t.weight_rule) for name, t in ingest.items()} == {
        "orders": ("lake_drivers", 10, "absolute"), "clicks": ("lake_drivers", 1, "absolute")}
    maintenance = bag.dags["sluice_maintenance"].tasks
    assert maintenance and {t.pool for t in maintenance} == {"lake_drivers"}
    # freshness tasks start no Spark: Airflow's default pool
    write_spec(tmp_path, orders_spec(name="orders", freshness={"warn_after": "2h"}))
    assert {t.pool for t in dag_bag(monkeypatch, tmp_path).dags["sluice_freshness"].tasks} == {"default_pool"}


def test_a_tasks_own_parse_makes_only_its_dag_and_keeps_its_upstreams_asset(monkeypatch, tmp_path):
    # a task's process parses the file with Airflow's parsing context naming its DAG (task_runner)
    write_spec(tmp_path, orders_spec(name="bronze_one"))
    write_spec(tmp_path, orders_spec(name="other_one"))
    write_spec(tmp_path, {"name": "silver_one", "schedule": {"asset": "bronze_one"}, "sink": {"path": "silver/one"},
                          "source": {"format": "delta", "pipeline": "bronze_one"}})
    monkeypatch.setenv("_AIRFLOW_PARSING_CONTEXT_DAG_ID", "silver_one")
    bag = dag_bag(monkeypatch, tmp_path)
    assert not bag.import_errors
    assert sorted(d for d in bag.dag_ids if not d.startswith("sluice_")) == ["silver_one"]
    assert [a.name for a in bag.dags["silver_one"].timetable.asset_condition.objects] == ["sluice.bronze_one"]
    # a name that is no pipeline's (a maintenance task's DAG parses its own file): every DAG, as without one
    monkeypatch.setenv("_AIRFLOW_PARSING_CONTEXT_DAG_ID", "sluice_maintenance")
    assert sorted(d for d in dag_bag(monkeypatch, tmp_path).dag_ids if not d.startswith("sluice_")) == [
        "bronze_one", "other_one", "silver_one"]


def test_the_trigger_forms_fields_declare_the_dialect_their_keywords_are_read_in(sample_bag):
    # draft 7: Airflow checks each field's schema against its dialect's meta-schema for every scheduled DAG it
    # makes, and 2020-12's took half of a 1,000-spec parse (bench P5)
    params = sample_bag.dags["orders_bronze"].params
    assert {name: params.get_param(name).schema.get("$schema") for name in params} == {
        name: "http://json-schema.org/draft-07/schema#" for name in params}
