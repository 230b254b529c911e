"""source.clean_source: ingested landing files archived or deleted once their batch is committed in the table and
the checkpoint and the retention has passed -- on real Spark and Delta, in-process; the kills of a cleaning as
real kill -9s of a process that cleans."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sluice.contract import run_job
from sluice.contract.request import run_request
from sluice.operations.ledger import latest_runs
from sluice.storage.checkpoint import Checkpoint
from spark_jobs.run.clean_source import clean, committed_files
from spark_jobs.run.runner import RunFailed, run_pipeline
from tests.helpers import (
    delta_version,
    make_spec,
    order_lines,
    tree_digest,
    write_lines,
)

ORDERS_SCHEMA = "id BIGINT, ts TIMESTAMP, customer STRING, amount DOUBLE"


def spec_of(clean_source: dict, **extra):
    return make_spec({"name": "orders",
                      "source": {"format": "json", "path": "landing/orders", "schema": ORDERS_SCHEMA,
                                 "clean_source": clean_source},
                      "sink": {"path": "bronze/orders"}, **extra})


ARCHIVE_NOW = {"mode": "archive", "archive_dir": "archive/orders", "retention": 0}


def land(lake, name: str, ids: range) -> Path:
    return write_lines(lake.lake_root / "landing" / "orders" / name, order_lines(ids))


def run(spark, spec, lake, *, dry_run=False, ledger=False, backfill=None, run_id="t") -> dict:
    slice_ = None
    if backfill:
        slice_ = run_request(spec, mode="backfill", backfill_from=backfill[0], backfill_to=backfill[1]).backfill
    job = run_job(trigger="available_now", dry_run=dry_run, run_id=run_id, write_ledger=ledger, backfill=slice_)
    return run_pipeline(spark, spec, lake, job).to_json()


def ids(spark, spec, lake) -> list[int]:
    return sorted(r.id for r in spark.read.format("delta").load(spec.sink_path(lake)).select("id").collect())


def files(folder: Path) -> dict[str, str]:
    """The files under ``folder`` (hidden ones too) by relative path -> content."""
    return {str(p.relative_to(folder)): p.read_text() for p in sorted(folder.rglob("*")) if p.is_file()} \
        if folder.exists() else {}


def test_archive_moves_exactly_the_committed_files_and_the_next_run_takes_only_new_ones(spark, lake):
    spec = spec_of(ARCHIVE_NOW)
    landing, archive = lake.lake_root / "landing" / "orders", lake.lake_root / "archive" / "orders"
    a, b = land(lake, "dt=2026-11-01/a.json", range(0, 3)), land(lake, "dt=2026-11-02/b.json", range(3, 5))
    landed = {"dt=2026-11-01/a.json": a.read_text(), "dt=2026-11-02/b.json": b.read_text()}

    first = run(spark, spec, lake, ledger=True, run_id="first")

    assert (first["input_rows"], first["output_rows"]) == (5, 5)
    cleaned = first["cleaned_files"]
    assert sorted(cleaned.pop("paths")) == [str(a), str(b)]
    assert cleaned == {"mode": "archive", "retention": "0s", "archive_dir": str(archive), "count": 2, "waiting": 0,
                       "skipped": 0, "skipped_paths": {}}
    assert files(archive) == landed  # the same bytes, the same path below the folder
    assert files(landing) == {}  # the (now empty) day folders stay
    assert ids(spark, spec, lake) == list(range(5))
    assert first["backlog_after"]["files"] == 0
    [row] = latest_runs(str(lake.ledger_path), "orders")
    assert (row["cleaned_files"], sorted(row["cleaned_paths"])) == (2, [str(a), str(b)])

    c = land(lake, "dt=2026-11-02/c.json", range(5, 9))
    second = run(spark, spec, lake)
    # the archived files are neither input again nor "overwritten": only the new file is read, then archived
    assert (second["input_rows"], second["output_rows"]) == (4, 4)
    assert second["overwritten_files"]["count"] == 0
    assert (second["cleaned_files"]["count"], second["cleaned_files"]["paths"]) == (1, [str(c)])
    assert sorted(files(archive)) == ["dt=2026-11-01/a.json", "dt=2026-11-02/b.json", "dt=2026-11-02/c.json"]
    assert ids(spark, spec, lake) == list(range(9))


def test_within_the_retention_or_in_a_dry_run_nothing_moves_and_a_run_after_it_cleans(spark, lake):
    spec = spec_of({"mode": "archive", "archive_dir": "archive/orders", "retention": "1h"})
    landing, archive = lake.lake_root / "landing" / "orders", lake.lake_root / "archive" / "orders"
    land(lake, "a.json", range(0, 3))
    land(lake, "b.json", range(3, 5))
    before = tree_digest(landing)
    # a dry run cleans nothing, even with a retention of 0
    dry = run(spark, spec_of(ARCHIVE_NOW), lake, dry_run=True)
    assert dry["input_rows"] == 5 and "cleaned_files" not in dry
    assert tree_digest(landing) == before and not (lake.lake_root / "archive").exists()

    first = run(spark, spec, lake)

    assert (first["cleaned_files"]["count"], first["cleaned_files"]["waiting"]) == (0, 2)
    assert sorted(files(landing)) == ["a.json", "b.json"] and not archive.exists()
    # the retention counts from the batch's commit in the checkpoint (commits/0's modification time)
    checkpoint, table = spec.checkpoint_path(lake), spec.sink_path(lake)
    committed_at = Checkpoint(checkpoint).commit_times()[0]
    early = clean(spec, lake, checkpoint, table, now=committed_at + 3599)
    assert (early["count"], early["waiting"]) == (0, 2)
    assert sorted(files(landing)) == ["a.json", "b.json"]

    later = clean(spec, lake, checkpoint, table, now=committed_at + 3600)

    assert (later["count"], later["waiting"]) == (2, 0)
    assert sorted(files(archive)) == ["a.json", "b.json"] and files(landing) == {}
    assert ids(spark, spec, lake) == list(range(5))


def test_a_batch_in_the_table_but_not_in_the_checkpoint_is_not_cleaned_until_a_run_commits_it(spark, lake):
    # (a) the kill between the sink's Delta commit of batch 1 and the checkpoint's commits/1, as the runner's
    # tests make it: Delta has the batch, the checkpoint does not mark it done
    spec = spec_of({"mode": "archive", "archive_dir": "archive/orders", "retention": "1h"})
    landing, archive = lake.lake_root / "landing" / "orders", lake.lake_root / "archive" / "orders"
    a = land(lake, "a.json", range(0, 3))
    run(spark, spec, lake)
    b = land(lake, "b.json", range(3, 7))
    run(spark, spec, lake)
    checkpoint, table = Path(spec.checkpoint_path(lake)), spec.sink_path(lake)
    (checkpoint / "commits" / "1").unlink()
    (checkpoint / "commits" / ".1.crc").unlink(missing_ok=True)

    # only batch 0 is committed in both; nothing at all when the table lacks the pipeline's transactions
    assert [(c.path, c.batch) for c in committed_files(spec, str(checkpoint), table)] == [(str(a), 0)]
    assert committed_files(spec, str(checkpoint), str(lake.lake_root / "elsewhere")) == []
    after_retention = time.time() + 7200
    assert clean(spec, lake, str(checkpoint), table, now=after_retention)["count"] == 1
    assert sorted(files(archive)) == ["a.json"] and sorted(files(landing)) == ["b.json"]

    # the next run commits batch 1 in the checkpoint (Delta skips its write: no duplicate), then cleans it
    replay = run(spark, spec_of(ARCHIVE_NOW), lake)

    assert (replay["skipped_batches"], replay["input_rows"]) == ([1], 0)
    assert (replay["cleaned_files"]["count"], replay["cleaned_files"]["paths"]) == (1, [str(b)])
    assert sorted(files(archive)) == ["a.json", "b.json"] and files(landing) == {}
    assert ids(spark, spec, lake) == list(range(7))
    assert delta_version(table) == replay["delta_version_before"] == replay["delta_version_after"]


def test_a_stateful_query_cleans_only_files_its_bad_records_query_has_taken_too(spark, lake):
    # an aggregation's bad records are set aside by a companion query with its own checkpoint, which reads the
    # same folder first: a file it has not committed must stay, or its bad records would never be quarantined
    spec = spec_of({"mode": "delete", "retention": "1h"},
                   transform={"sql": "SELECT customer, count(*) AS n FROM source GROUP BY customer"},
                   sink={"path": "bronze/orders", "mode": "complete"})
    a = land(lake, "a.json", range(0, 3))
    run(spark, spec, lake)
    checkpoint, table = Path(spec.checkpoint_path(lake)), spec.sink_path(lake)
    assert [c.path for c in committed_files(spec, str(checkpoint), table)] == [str(a)]

    (checkpoint / "bad_records" / "commits" / "0").unlink()  # the companion's batch not marked done

    assert committed_files(spec, str(checkpoint), table) == []
    assert clean(spec, lake, str(checkpoint), table, now=time.time() + 7200)["count"] == 0
    assert a.is_file()


KILLER = """
import os, signal, sys
from sluice.settings import load_settings
from sluice.spec import load_spec
from spark_jobs.run.clean_source import clean

spec, settings, stop_after = load_spec(sys.argv[1]), load_settings(), int(sys.argv[2])
done = []

def step(what, path):
    done.append((what, path))
    print(what, path, flush=True)
    if len(done) == stop_after:
        os.kill(os.getpid(), signal.SIGKILL)

clean(spec, settings, spec.checkpoint_path(settings), spec.sink_path(settings), on_step=step)
"""


def test_a_cleaning_killed_or_failing_at_any_step_loses_no_file_and_the_next_finishes_it(spark, lake, tmp_path):
    data = {"name": "orders", "source": {"format": "json", "path": "landing/orders", "schema": ORDERS_SCHEMA,
                                         "clean_source": ARCHIVE_NOW}, "sink": {"path": "bronze/orders"}}
    spec_file = tmp_path / "orders.yaml"
    spec_file.write_text(json.dumps(data))
    spec = make_spec(data)
    landing, archive = lake.lake_root / "landing" / "orders", lake.lake_root / "archive" / "orders"
    for n in range(3):
        land(lake, f"f{n}.json", range(n * 10, n * 10 + 2))
    saved = tmp_path / "landed"
    shutil.copytree(landing, saved)  # copy2: the modification times the source log recorded
    content = files(landing)
    # the run ingests with a long retention, so that the cleanings below are the ones under test
    run(spark, spec_of({"mode": "archive", "archive_dir": "archive/orders", "retention": "1h"}), lake)
    checkpoint, table = spec.checkpoint_path(lake), spec.sink_path(lake)
    table_before = tree_digest(Path(table))

    def landed_again() -> None:
        shutil.rmtree(landing)
        shutil.rmtree(archive, ignore_errors=True)
        shutil.copytree(saved, landing)

    # (b) kill -9 of a process that cleans, after each file operation in turn: every file stays whole, in the
    # source folder or in the archive; the next cleaning archives the rest
    for stop_after in (1, 2):
        landed_again()
        killed = subprocess.run([sys.executable, "-c", KILLER, str(spec_file), str(stop_after)], capture_output=True,
                                text=True, timeout=300, env=dict(os.environ), cwd=Path(__file__).parents[2])
        assert killed.returncode == -signal.SIGKILL, killed.stderr[-3000:]
        assert len(killed.stdout.splitlines()) == stop_after  # it died right after that step
        assert len(files(archive)) == stop_after and len(files(landing)) == 3 - stop_after
        assert {**files(archive), **files(landing)} == content

        again = clean(spec, lake, checkpoint, table)

        assert again["count"] == 3 - stop_after
        assert files(archive) == content and files(landing) == {}

    # a failure right after the first file moved (in-process): the others stay where they landed
    landed_again()

    def fail_after_first(step: str, path: str) -> None:
        raise OSError(f"injected after {step} {Path(path).name}")

    with pytest.raises(OSError, match="injected after moved f"):
        clean(spec, lake, checkpoint, table, on_step=fail_after_first)
    assert len(files(archive)) == 1 and len(files(landing)) == 2
    assert {**files(archive), **files(landing)} == content

    # a cleaning cut short between an archive copy and the delete of the original (how it goes in a bucket, or
    # across devices): both are there, and the next cleaning deletes the original; a landing file rewritten
    # after it was ingested is not what the table holds: it stays where it is
    [left, other] = sorted(files(landing))
    shutil.copy2(landing / left, archive / left)
    rewritten = landing / other
    write_lines(rewritten, order_lines(range(90, 95)))

    finished = clean(spec, lake, checkpoint, table)

    assert (finished["count"], finished["paths"]) == (1, [str(landing / left)])
    assert finished["skipped"] == 1
    assert finished["skipped_paths"] == {
        str(rewritten): "rewritten after it was ingested (its new content is not in the table)"}
    assert files(landing) == {other: rewritten.read_text()}
    assert files(archive) == {k: v for k, v in content.items() if k != other}
    assert tree_digest(Path(table)) == table_before
    assert ids(spark, spec, lake) == [0, 1, 10, 11, 20, 21]


def daily_spec(clean_source: dict) -> dict:
    return {"name": "daily",
            "source": {"format": "json", "path": "landing/daily", "schema": "id BIGINT, ts TIMESTAMP, amount DOUBLE",
                       "clean_source": clean_source},
            "transform": {"sql": "SELECT id, ts, amount, to_date(ts) AS day FROM source"},
            "sink": {"partition_by": ["day"]},
            "backfill": {"column": "day", "path": "landing/daily/dt={{ ds }}"}}


def land_day(lake, day: int, name: str, ids_: range) -> Path:
    lines = [json.dumps({"id": i, "ts": f"2026-11-{day:02d}T08:00:00Z", "amount": i}) for i in ids_]
    return write_lines(lake.lake_root / "landing" / "daily" / f"dt=2026-11-{day:02d}" / name, lines)


def test_a_backfill_reads_archived_files_from_the_archive_and_cleans_nothing(spark, lake):
    spec = make_spec(daily_spec({"mode": "archive", "archive_dir": "archive/daily", "retention": 0}))
    land_day(lake, 1, "a.json", range(0, 3))
    land_day(lake, 2, "b.json", range(3, 5))
    run(spark, spec, lake)
    archive = lake.lake_root / "archive" / "daily"
    assert sorted(files(archive)) == ["dt=2026-11-01/a.json", "dt=2026-11-02/b.json"]
    land_day(lake, 1, "late.json", range(7, 9))  # landed after the run: not ingested yet, so not backfilled
    checkpoint = Path(spec.checkpoint_path(lake))
    before = tree_digest(checkpoint)

    backfill = run(spark, spec, lake, backfill=("2026-11-01", "2026-11-02"))

    assert (backfill["input_rows"], backfill["backfill"]["files"]) == (5, 2)
    assert "cleaned_files" not in backfill
    assert sorted((r.id, str(r.day)) for r in spark.read.format("delta").load(spec.sink_path(lake)).collect()) == [
        (0, "2026-11-01"), (1, "2026-11-01"), (2, "2026-11-01"), (3, "2026-11-02"), (4, "2026-11-02")]
    assert tree_digest(checkpoint) == before
    assert sorted(files(lake.lake_root / "landing" / "daily")) == ["dt=2026-11-01/late.json"]


def test_delete_mode_deletes_the_committed_files_and_a_backfill_of_them_is_refused(spark, lake):
    spec = make_spec(daily_spec({"mode": "delete", "retention": 0}))
    a = land_day(lake, 1, "a.json", range(0, 3))
    first = run(spark, spec, lake)
    assert (first["cleaned_files"]["mode"], first["cleaned_files"]["count"]) == ("delete", 1)
    assert "archive_dir" not in first["cleaned_files"]
    assert files(lake.lake_root / "landing" / "daily") == {}
    assert sorted(r.id for r in spark.read.format("delta").load(spec.sink_path(lake)).collect()) == [0, 1, 2]
    version = delta_version(spec.sink_path(lake))

    with pytest.raises(RunFailed) as refused:
        run(spark, spec, lake, backfill=("2026-11-01", "2026-11-01"))

    assert refused.value.summary.refused
    assert refused.value.summary.error == (
        f"refused: 1 file(s) the slice was ingested from are no longer in the source folder: {a} "
        "(source.clean_source: delete). The table was not changed. Put the files back where they landed to "
        "backfill this slice (or backfill a slice whose files are kept); clean_source mode archive keeps files "
        "a backfill can read.")
    assert delta_version(spec.sink_path(lake)) == version

    # a reset would rebuild the table from the source folder, without the deleted file's rows: refused
    reset = run_job(trigger="available_now", reset=True, run_id="reset", write_ledger=False)
    with pytest.raises(RunFailed) as refused:
        run_pipeline(spark, spec, lake, reset)
    assert refused.value.summary.refused
    assert refused.value.summary.error.startswith(
        f"refused: a reset of daily rebuilds its table from the files in the source folder, but "
        f"source.clean_source (delete) has cleaned 1 file(s) it ingested, e.g. {a}, deleted: the new table would "
        "lose their rows. Options: move the archived files back")
    assert delta_version(spec.sink_path(lake)) == version
