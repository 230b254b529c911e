"""Every spec gives a DAG; bad specs are import errors that hide nothing; parsing never imports PySpark."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from airflow.dag_processing.dagbag import DagBag
from sluice_airflow.pipeline_operator import SluicePipelineOperator

from sluice.spec import load_spec, spec_files
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
    assert sorted(sample_bag.dag_ids) == sorted(load_spec(p).name for p in SAMPLE_SPECS)


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
    assert dag.schedule == spec.schedule
    # the "Trigger DAG" form: run mode and trigger, validated by their JSON schema
    assert dag.params["mode"] == "incremental"
    assert dag.params.get_param("mode").schema["enum"] == ["incremental", "dry_run", "reset"]
    assert dag.params["trigger"] == spec.trigger
    dag.check_cycle()


def test_bad_spec_is_an_import_error_and_does_not_hide_the_others(monkeypatch, tmp_path):
    write_spec(tmp_path, orders_spec(name="good_one"))
    write_spec(tmp_path, orders_spec(name="bad_one", sink={"mode": "upsert"}))
    bag = dag_bag(monkeypatch, tmp_path)
    assert bag.dag_ids == ["good_one"]
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
    assert "orders_bronze" in result["dags"]
    assert result["pyspark"] == []


def _env() -> dict[str, str]:
    import os

    return dict(os.environ)
