"""`sluice run`: the real spark-submit, progress on stderr, the run summary as the last stdout line."""

from __future__ import annotations

import shutil
from pathlib import Path

from tests.e2e.conftest import last_json_line, sluice
from tests.helpers import (
    delta_version,
    files_under,
    new_files_since,
    orders_spec,
    own_temp_dir,
    run_here,
    tree_digest,
    write_orders,
    write_spec,
)

SUMMARY_KEYS = {"pipeline", "trigger", "dry_run", "batches", "input_rows", "output_rows",
                "delta_version_before", "delta_version_after", "micro_batches", "status", "run_id"}


def test_sluice_run_is_incremental_and_dry_run_predicts_the_next_run(lake, spark, monkeypatch, tmp_path):
    spec_path = write_spec(lake.pipelines_dir, orders_spec())
    landing = lake.lake_root / "landing" / "orders"
    write_orders(landing, "a.json", range(0, 10))

    first = sluice("run", str(spec_path))
    assert first.returncode == 0, first.stderr[-3000:]
    summary = last_json_line(first.stdout)
    assert SUMMARY_KEYS <= set(summary)
    assert (summary["pipeline"], summary["trigger"], summary["dry_run"]) == ("orders", "available_now", False)
    assert (summary["batches"], summary["input_rows"], summary["output_rows"]) == (1, 10, 10)
    assert (summary["delta_version_before"], summary["delta_version_after"]) == (None, 0)  # batch 0 creates it
    assert Path(summary["micro_batches"][0]["sources"][0]["files"][0]).name == "a.json"
    assert "[sluice] orders batch 0: 10 rows in" in first.stderr  # progress streams to stderr
    assert "spark-submit --master local[*]" in first.stderr  # the command, as the hook logs it

    write_orders(landing, "b.json", range(10, 15))
    checkpoint = Path(summary["checkpoint"])
    before = tree_digest(checkpoint)
    roots = [lake.lake_root, lake.checkpoint_root, own_temp_dir(monkeypatch, tmp_path)]  # TMPDIR of `sluice`
    files_before = files_under(roots)
    dry = sluice("run", "orders", "--dry-run")  # by pipeline name
    assert dry.returncode == 0, dry.stderr[-3000:]
    dry_summary = last_json_line(dry.stdout)
    assert (dry_summary["dry_run"], dry_summary["input_rows"]) == (True, 5)
    assert tree_digest(checkpoint) == before
    assert dry_summary["delta_version_after"] == 0
    assert delta_version(summary["sink"]) == 0  # no commit, as delta-rs reads the table
    # nothing left behind but the run's line in the ledger (every run is recorded, a dry run too)
    assert new_files_since(roots, files_before, expected=(lake.ledger_path,)) == []

    # the next real run, in-process (its `--trigger once` is read as tests/sluice/test_cli.py shows)
    real = run_here(spark, lake, spec_path, trigger="once", run_id="cli__third")
    assert (real["trigger"], real["input_rows"], real["delta_version_after"]) == ("once", 5, 1)
    assert spark.read.format("delta").load(summary["sink"]).count() == 15

    # every run is in the ledger; `sluice status` shows them newest first
    status = sluice("status", "orders")
    assert status.returncode == 0, status.stderr[-3000:]
    lines = status.stdout.splitlines()
    assert lines[0] == f"== orders: latest runs (ledger {lake.ledger_path})"
    assert lines[1].split() == ["started", "(UTC)", "run", "mode", "status", "batches", "rows", "in", "rows", "out",
                                "quarantined", "versions", "backlog", "after", "secs", "error"]
    runs = [line.split() for line in lines[3:]]
    assert [(r[2], r[3], r[4], r[5], r[6], r[7]) for r in runs] == [
        (real["run_id"], "incremental", "succeeded", "1", "5", "5"),
        (dry_summary["run_id"], "dry_run", "succeeded", "1", "5", "5"),
        (summary["run_id"], "incremental", "succeeded", "1", "10", "10"),
    ]
    assert [(r[8], r[9]) for r in runs] == [("0", "0->1"), ("0", "0"), ("0", "new->0")]
    # what each run left waiting (a dry run: what it found waiting, b.json)
    assert [(r[10], r[11]) for r in runs] == [("0", "files"), ("1", "files"), ("0", "files")]


def test_a_lost_checkpoint_is_refused_and_reset_checkpoint_rebuilds_the_table_from_the_source(lake, spark):
    spec_path = write_spec(lake.pipelines_dir, orders_spec())
    landing = lake.lake_root / "landing" / "orders"
    write_orders(landing, "a.json", range(0, 10))
    first = run_here(spark, lake, spec_path)  # the set-up run
    assert first["status"] == "succeeded", first["error"]
    table, checkpoint = first["sink"], Path(first["checkpoint"])

    # Given the checkpoint folder is lost (and the source has grown since)
    shutil.rmtree(checkpoint)
    write_orders(landing, "b.json", range(10, 15))

    # When a plain run starts, Then it is refused: it would ingest the whole source again into the full table
    # (in-process: the driver refuses, and a driver's failure through `sluice run` -- exit 1, the summary as the
    # last line -- is test_sluice_run_failure_exits_1_with_the_error_in_the_summary's)
    summary = run_here(spark, lake, spec_path)
    assert (summary["status"], summary["refused"], summary["batches"]) == ("failed", True, 0)
    assert summary["error"] == (
        f"refused: the checkpoint of orders ({checkpoint}) is missing or empty, but its table {table} already "
        "holds data written by this pipeline: running now would ingest the whole source again and duplicate it. "
        "Options: restore the checkpoint folder from a backup (then run again); or run once with --reset-checkpoint "
        "(Airflow: trigger with mode=reset) to start a new checkpoint and REPLACE the table's content with the "
        "source's (the old versions stay in the Delta history); or point sink.path at a new table."
    )
    # nothing written: neither the table nor a new checkpoint
    assert delta_version(table) == 0
    assert sorted(r.id for r in spark.read.format("delta").load(table).collect()) == list(range(10))
    assert not checkpoint.exists()

    # When it runs with --reset-checkpoint (in-process: the CLI's flag is read as tests/sluice/test_cli.py shows),
    # Then the table holds the whole source, each record once
    summary = run_here(spark, lake, spec_path, reset=True)
    assert (summary["mode"], summary["status"]) == ("reset", "succeeded")
    assert (summary["input_rows"], summary["output_rows"]) == (15, 15)
    assert sorted(r.id for r in spark.read.format("delta").load(table).collect()) == list(range(15))
    # a missing checkpoint has nothing to keep beside: only a checkpoint that exists is set aside (.replaced-<time>)
    assert "replaced_checkpoint" not in summary
    assert sorted(p.name for p in checkpoint.parent.iterdir() if p.name.startswith("orders")) == ["orders"]


def test_sluice_run_failure_exits_1_with_the_error_in_the_summary(lake):
    spec_path = write_spec(lake.pipelines_dir, orders_spec(transform={"sql": "SELECT missing_col FROM source"}))
    write_orders(lake.lake_root / "landing" / "orders", "a.json", range(3))
    done = sluice("run", str(spec_path))
    assert done.returncode == 1
    summary = last_json_line(done.stdout)
    assert summary["status"] == "failed"
    assert "missing_col" in summary["error"]


def test_sluice_run_of_an_invalid_spec_fails_before_spark(lake):
    spec_path = write_spec(lake.pipelines_dir, orders_spec(trigger="sometimes"))
    done = sluice("run", str(spec_path), timeout=60)
    assert done.returncode == 1
    assert done.stdout == ""
    assert f"{spec_path}: trigger: 'sometimes' is not allowed; use one of: available_now, once" in done.stderr
    assert "spark-submit" not in done.stderr
