"""`sluice validate` and argument handling (no Spark here; `sluice run` is in tests/e2e)."""

from __future__ import annotations

import pytest

from sluice.cli import main
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
