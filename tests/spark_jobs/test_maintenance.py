"""Maintenance on real Spark and Delta: OPTIMIZE compacts a pipeline's small files, VACUUM honours Delta's safety
retention unless the spec forces it, a dry run changes nothing, the ledger records what was done, and the runs
keep their checkpoint's history bounded."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest

from sluice.contract import maintain_job, run_job
from sluice.operations.ledger import latest_runs
from sluice.spec import SpecError
from sluice.storage.lock import PipelineBusy, launcher_lock, maintenance_lock
from spark_jobs.run.maintenance import MaintenanceFailed, maintain_pipeline
from spark_jobs.run.runner import run_pipeline
from tests.helpers import (
    delta_version,
    make_spec,
    orders_spec,
    write_lines,
    write_orders,
)


def data_files(table: Path) -> dict[str, int]:
    return {str(p.relative_to(table)): p.stat().st_size for p in table.rglob("*.parquet")}


def rows(spark, path: str) -> list[tuple]:
    return sorted(tuple(r) for r in spark.read.format("delta").load(path).select("id", "amount").collect())


def ingest_in_runs(spark, spec, lake, runs: int, first: int = 0) -> None:
    """``runs`` one-shot runs of one file each (and one bad line, to the quarantine): a small file per run."""
    landing = lake.lake_root / "landing" / "orders"
    for n in range(first, first + runs):
        write_orders(landing, f"part-{n}.json", range(n * 10, n * 10 + 10))
        write_lines(landing / f"bad-{n}.json", ['{"id": "not a number", "amount": 1'])
        run_pipeline(spark, spec, lake, run_job(trigger="available_now", run_id=f"run-{n}", write_ledger=False))


def test_optimize_compacts_and_vacuum_keeps_files_within_the_safety_retention(spark, lake):
    spec = make_spec(orders_spec(sink={"path": "bronze/orders"}))
    ingest_in_runs(spark, spec, lake, runs=3)
    table = Path(spec.sink_path(lake))
    before_rows, before_files = rows(spark, str(table)), data_files(table)
    assert len(before_rows) == 30 and len(before_files) >= 3

    summary = maintain_pipeline(spark, spec, lake, maintain_job(run_id="m1")).to_json()

    sink = summary["tables"]["sink"]
    assert sink["optimize"]["files_removed"] == len(before_files)
    assert sink["optimize"]["files_added"] == 1
    assert sink["optimize"]["bytes_removed"] == sum(before_files.values())
    # the compacted-away files are younger than 168 h: VACUUM keeps them (time travel still works)
    assert sink["vacuum"] == {"retention_hours": 168, "forced": False, "files_deleted": 0, "bytes_deleted": 0}
    assert set(before_files) <= set(data_files(table))
    assert rows(spark, str(table)) == before_rows
    assert summary["delta_version_after"] == summary["delta_version_before"] + 1 == delta_version(table)
    # the quarantine table (3 bad lines, one file per run) is maintained too
    assert summary["tables"]["quarantine"]["optimize"]["files_removed"] == 3
    assert summary["files_compacted"] == len(before_files) + 3 and summary["files_written"] == 2
    assert summary["bytes_removed"] == 0
    assert summary["checkpoint_size"]["commits"] == 3

    ledger = latest_runs(str(lake.ledger_path), "orders")
    assert [(r["mode"], r["status"], r["run_id"]) for r in ledger] == [("maintenance", "succeeded", "m1")]
    recorded = json.loads(ledger[0]["maintenance"])
    assert recorded["files_compacted"] == summary["files_compacted"]
    assert recorded["tables"]["sink"]["optimize"]["files_added"] == 1


def test_forced_short_retention_removes_the_compacted_files_and_a_dry_run_changes_nothing(spark, lake):
    spec = make_spec(orders_spec(maintenance={"vacuum_retention_hours": 0, "force_retention": True}))
    ingest_in_runs(spark, spec, lake, runs=3)
    table = Path(spec.sink_path(lake))
    small = data_files(table)
    expected = rows(spark, str(table))

    first = maintain_pipeline(spark, spec, lake, maintain_job(run_id="compact", write_ledger=False)).to_json()
    # OPTIMIZE's commit is new, so the small files it replaced are unreferenced at once: retention 0 takes them
    assert first["tables"]["sink"]["vacuum"]["files_deleted"] == len(small)
    assert first["tables"]["sink"]["vacuum"]["bytes_deleted"] == sum(small.values())
    assert first["tables"]["sink"]["vacuum"]["forced"] is True
    remaining = data_files(table)
    assert len(remaining) == 1 and not set(small) & set(remaining)
    assert rows(spark, str(table)) == expected

    # new small files; a dry run reports what VACUUM would delete and deletes nothing
    ingest_in_runs(spark, spec, lake, runs=1, first=3)
    version = first["delta_version_after"] + 1
    files = data_files(table)
    dry = maintain_pipeline(spark, spec, lake, maintain_job(run_id="dry", dry_run=True, write_ledger=False)).to_json()
    assert dry["tables"]["sink"]["optimize"] == {"skipped": "dry run", "files": 2}
    assert dry["tables"]["sink"]["vacuum"]["files_deleted"] == 0 and dry["tables"]["sink"]["vacuum"]["dry_run"]
    assert data_files(table) == files and dry["delta_version_after"] == version
    assert delta_version(table) == version  # no commit, as delta-rs reads the table


def test_retention_below_the_safety_default_needs_force_and_zorder_skips_partition_columns():
    with pytest.raises(SpecError) as err:
        make_spec(orders_spec(maintenance={"vacuum_retention_hours": 24}))
    assert ("maintenance.vacuum_retention_hours: 24 is below Delta's safety default of 168 h (7 days)" in str(err.value)
            and "force_retention: true" in str(err.value))
    with pytest.raises(SpecError) as err:
        make_spec(orders_spec(sink={"partition_by": ["customer"]}, maintenance={"zorder_by": ["customer"]}))
    assert "maintenance.zorder_by: customer is a partition column (sink.partition_by)" in str(err.value)
    with pytest.raises(SpecError) as err:
        make_spec(orders_spec(maintenance={"checkpoint_batches_to_retain": 1}))
    assert "maintenance.checkpoint_batches_to_retain" in str(err.value)


def test_runs_keep_only_the_configured_number_of_batches_in_the_checkpoint(spark, lake):
    spec = make_spec(orders_spec(maintenance={"checkpoint_batches_to_retain": 2}))
    landing = lake.lake_root / "landing" / "orders"
    for n in range(6):
        write_orders(landing, f"part-{n}.json", range(n * 5, n * 5 + 5))
        run_pipeline(spark, spec, lake, run_job(trigger="available_now", run_id=f"r{n}", write_ledger=False))
    checkpoint = Path(spec.checkpoint_path(lake))
    offsets = sorted(int(p.name) for p in (checkpoint / "offsets").iterdir() if p.name.isdigit())
    commits = sorted(int(p.name) for p in (checkpoint / "commits").iterdir() if p.name.isdigit())
    # Spark purges the batches older than the last `checkpoint_batches_to_retain` (+ the one being planned)
    assert offsets[-1] == 5 and commits[-1] == 5
    assert len(offsets) <= 3 and len(commits) <= 3 and 0 not in offsets
    assert rows(spark, spec.sink_path(lake)) == sorted((i, i * 1.5) for i in range(30))


def test_maintenance_waits_for_a_running_run_and_then_refuses_naming_it(tmp_path):
    holder = launcher_lock(tmp_path, "orders", {"run_id": "scheduled__1"}).acquire()
    try:
        mark = time.monotonic()
        with pytest.raises(PipelineBusy) as busy:
            maintenance_lock(tmp_path, "orders", {"mode": "maintenance"}, wait_seconds=1).acquire()
        assert time.monotonic() - mark >= 1
        assert "pipeline orders is already running" in str(busy.value)
        assert "run scheduled__1" in str(busy.value) and "after waiting 1 s" in str(busy.value)
        threading.Timer(0.5, holder.release).start()
        lock = maintenance_lock(tmp_path, "orders", {"mode": "maintenance"}, wait_seconds=30).acquire()
        lock.release()
    finally:
        holder.release()


def test_maintenance_of_a_pipeline_that_has_no_table_yet_is_a_no_op(spark, lake):
    spec = make_spec(orders_spec())
    summary = maintain_pipeline(spark, spec, lake, maintain_job(write_ledger=False)).to_json()
    assert summary["tables"] == {} and summary["status"] == "succeeded"
    assert "has no table yet" in summary["note"]


def test_maintenance_refuses_while_an_orphan_driver_holds_the_pipeline(spark, lake):
    from sluice.storage.lock import driver_lock

    spec = make_spec(orders_spec())
    orphan = driver_lock(lake.checkpoint_root, "orders", {"run_id": "orphan"}).acquire()
    try:
        with pytest.raises(MaintenanceFailed) as failed:
            maintain_pipeline(spark, spec, lake, maintain_job(write_ledger=False))
        assert failed.value.summary.refused and "run orphan" in failed.value.summary.error
    finally:
        orphan.release()
