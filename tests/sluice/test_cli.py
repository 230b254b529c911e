"""`sluice validate` and argument handling (no Spark here; `sluice run` is in tests/e2e)."""

from __future__ import annotations

import pytest

from sluice_cli.main import main
from tests.helpers import orders_spec, write_spec


def test_validate_reports_ok_and_invalid_and_exits_1(lake, capsys):
    good = write_spec(lake.pipelines_dir, orders_spec(name="good"))
    bad = write_spec(lake.pipelines_dir, orders_spec(name="bad", sink={"mode": "upsert"}))
    assert main(["validate", str(good), str(bad)]) == 1
    out, err = capsys.readouterr()
    assert out == f"ok: {good} (pipeline good)\n"
    assert f"invalid: {bad}: sink.mode: 'upsert' is not allowed; use one of: append, complete" in err


def test_validate_without_arguments_checks_the_pipelines_folder(lake, capsys):
    write_spec(lake.pipelines_dir, orders_spec(name="one"))
    assert main(["validate"]) == 0
    assert "(pipeline one)" in capsys.readouterr().out


def test_validate_prints_the_trigger_once_warning(lake, capsys):
    spec = write_spec(lake.pipelines_dir, {
        "name": "w", "trigger": "once",
        "source": {"format": "json", "path": "e", "schema": "ts TIMESTAMP, word STRING"},
        "transform": {"watermark": {"column": "ts", "delay": "10 minutes"},
                      "sql": "SELECT word, count(*) AS n FROM source GROUP BY window(ts, '10 minutes'), word"},
    })
    assert main(["validate", str(spec)]) == 0
    assert "warning: " in capsys.readouterr().err


def test_run_of_unknown_pipeline_names_the_folder(lake, capsys):
    assert main(["run", "nosuch"]) == 1
    assert f"nosuch: no such spec file, and no pipeline of that name in {lake.pipelines_dir}" in capsys.readouterr().err


def test_bad_cli_arguments_exit_2_with_usage(capsys):
    with pytest.raises(SystemExit) as caught:
        main(["run", "x.yaml", "--trigger", "continuous"])
    assert caught.value.code == 2
    assert "invalid choice: 'continuous'" in capsys.readouterr().err


def _owned_table(folder, owner: str) -> None:
    """A Delta table whose log records ``owner`` as its writer, as a first batch's write records it
    (``delta.sluice.pipeline``; written by hand: delta-rs refuses a property it does not know)."""
    import json

    log = folder / "_delta_log"
    log.mkdir(parents=True)
    schema = {"type": "struct", "fields": [{"name": "id", "type": "long", "nullable": True, "metadata": {}}]}
    actions = [{"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}},
               {"metaData": {"id": "t", "format": {"provider": "parquet", "options": {}},
                             "schemaString": json.dumps(schema), "partitionColumns": [],
                             "configuration": {"delta.sluice.pipeline": owner}, "createdTime": 0}},
               {"commitInfo": {"operation": "WRITE", "operationParameters": {"mode": "Append"}}}]
    (log / f"{0:020d}.json").write_text("".join(json.dumps(a) + "\n" for a in actions), encoding="utf-8")


def test_validate_takes_a_pipeline_name_as_run_does(lake, capsys):
    path = write_spec(lake.pipelines_dir, orders_spec(name="by_name"), "some-file.yaml")
    assert main(["validate", "by_name"]) == 0
    assert capsys.readouterr().out == f"ok: {path} (pipeline by_name)\n"
    assert main(["validate", "nosuch"]) == 1
    assert f"invalid: nosuch: no such spec file, and no pipeline of that name in {lake.pipelines_dir}" in \
        capsys.readouterr().err


def test_validate_predicts_the_refusal_of_a_table_another_pipeline_writes(lake, capsys):
    # a copy of af's spec under a new name (or af renamed): the table still records af as its writer
    _owned_table(lake.lake_root / "bronze" / "orders", "af")
    copy = write_spec(lake.pipelines_dir, orders_spec(name="af_copy"))
    assert main(["validate", "af_copy"]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert (f"refused: {copy}: the next run would be refused: the sink table {lake.lake_root / 'bronze' / 'orders'} "
            "belongs to pipeline af, not af_copy: two pipelines writing one table would mix their data and "
            "checkpoints") in err
    assert ("Give af_copy its own sink.path; or, if af_copy is af renamed, add previous_names: [af] to its spec"
            in err)
    # the owner itself validates
    write_spec(lake.pipelines_dir, orders_spec(name="af"))
    assert main(["validate", "af"]) == 0


def test_validate_approves_a_rename_and_refuses_the_old_spec_left_beside_it(lake, capsys):
    _owned_table(lake.lake_root / "bronze" / "orders", "af")
    renamed = write_spec(lake.pipelines_dir, orders_spec(name="af_new", previous_names=["af"]))
    assert main(["validate", "af_new"]) == 0
    assert capsys.readouterr().out == f"ok: {renamed} (pipeline af_new)\n"
    assert main(["status", "af"]) == 1
    assert ("af: the pipeline af is now named af_new (its spec lists af in previous_names): use af_new"
            in capsys.readouterr().err)
    old = write_spec(lake.pipelines_dir, orders_spec(name="af"))
    assert main(["validate"]) == 1
    err = capsys.readouterr().err
    assert (f"name: 'af' is the name of {old} and an earlier name (previous_names) of {renamed} (af_new): both "
            "would run the same pipeline, with one table and checkpoint. Remove the old spec, or 'af' from "
            "previous_names") in err
    assert err.count("name: 'af' is the name of") == 2  # both files are refused: neither runs
    assert f"invalid: {old}: name: 'af'" in err and f"invalid: {renamed}: name: 'af'" in err


def test_validate_refuses_two_specs_of_the_folder_sharing_a_table_not_created_yet(lake, capsys):
    first = write_spec(lake.pipelines_dir, orders_spec(name="first"))
    second = write_spec(lake.pipelines_dir, orders_spec(name="second"))
    write_spec(lake.pipelines_dir, orders_spec(name="third", sink={"path": "bronze/third"}))
    assert main(["validate"]) == 1
    out, err = capsys.readouterr()
    assert out == f"ok: {lake.pipelines_dir / 'third.yaml'} (pipeline third)\n"
    table = lake.lake_root / "bronze" / "orders"
    assert (f"refused: {first}: the next run would be refused: sink.path: the table {table} is also the sink of "
            f"second ({second}): the first of them to run would own it") in err
    assert f"refused: {second}: the next run would be refused: sink.path: the table {table} is also the sink of first" in err


@pytest.mark.parametrize(("args", "expected"), [
    ([], ("incremental", "available_now", False, False)),
    (["--trigger", "once"], ("incremental", "once", False, False)),
    (["--dry-run"], ("incremental", "available_now", True, False)),
    (["--reset-checkpoint", "--max-files-per-trigger", "1"], ("reset", "available_now", False, True)),
])
def test_sluice_run_hands_its_flags_to_the_driver_in_the_job_request(lake, monkeypatch, args, expected):
    """What `sluice run`'s flags become in the request the driver reads (its run there is tested in-process and
    in tests/e2e/test_cli_run.py): here up to the launch, no Spark."""
    import sluice_cli.pipelines as cli

    launched = []
    monkeypatch.setattr(cli, "_launch", lambda job, *_, **__: launched.append(job) or 0)
    # the run's environment for its child processes: not this test process's, which later tests share
    monkeypatch.setattr(cli, "_apply_env", lambda settings: None)
    spec_path = write_spec(lake.pipelines_dir, orders_spec())
    assert main(["run", "orders", *args]) == 0
    (job,) = launched
    assert (job.run.mode, job.run.trigger, job.run.dry_run, job.reset) == expected
    assert job.spec_path == str(spec_path) and job.run_id.startswith("cli__")
    assert job.run.max_files_per_trigger == (1 if "--max-files-per-trigger" in args else None)
