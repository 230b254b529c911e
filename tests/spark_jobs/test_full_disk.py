"""A full disk (issue 38, item 6), on a real one: a small tmpfs holds the lake, the checkpoints, the ledger and
its spool. The run that meets it fails saying so first, with no native panic on stderr; its ledger row waits in
the spool (the spool's reserve gives it room) and is appended, marked recorded_late, once space returns; the
data files its failed write left are named in its summary and deleted by the next maintenance run; the run
after it takes the failed batch, every row once."""

from __future__ import annotations

import json
import os
import random
import string
import subprocess
from collections import Counter
from pathlib import Path

import pytest

from sluice.contract import maintain_job, run_job
from sluice.operations import ledger_spool
from sluice.operations.ledger import latest_runs
from sluice.settings import load_settings
from sluice.spec import load_spec
from spark_jobs.run.maintenance import maintain_pipeline
from spark_jobs.run.runner import RunFailed, run_pipeline
from tests.helpers import write_spec

DISK_MB = 48


@pytest.fixture
def small_disk(tmp_path: Path):
    """A tmpfs of DISK_MB megabytes, mounted for the test and unmounted after it (the suite runs as root)."""
    disk = tmp_path / "disk"
    disk.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={DISK_MB}m", "tmpfs", str(disk)],
                          capture_output=True, text=True)
    assert done.returncode == 0, f"mounting a tmpfs failed (the full-disk test needs root): {done.stderr}"
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], capture_output=True)


def land(folder: Path, name: str, first: int, count: int, width: int) -> None:
    """``count`` records of ``width`` random letters (parquet cannot shrink them much)."""
    rng = random.Random(first)
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / name).open("w", encoding="utf-8") as out:
        for n in range(first, first + count):
            out.write(json.dumps({"id": n, "note": "".join(rng.choices(string.ascii_letters, k=width))}) + "\n")


def run(spark, spec_path: Path, settings, run_id: str) -> dict:
    try:
        return run_pipeline(spark, load_spec(spec_path), settings, run_job(spec_path=str(spec_path),
                                                                            run_id=run_id)).to_json()
    except RunFailed as failed:
        return failed.summary.to_json()


def test_a_full_disk_fails_the_run_clearly_records_it_late_and_maintenance_removes_what_it_left(
        spark, small_disk, tmp_path, monkeypatch, capfd):
    for key, sub in (("SLUICE_LAKE_ROOT", "lake"), ("SLUICE_CHECKPOINT_ROOT", "checkpoints")):
        (small_disk / sub).mkdir()
        monkeypatch.setenv(key, str(small_disk / sub))
    monkeypatch.setenv("SLUICE_PIPELINES", str(tmp_path))
    settings = load_settings()
    landing = tmp_path / "landing"  # the landing folder is on another disk: only the writes meet the full one
    spec_path = write_spec(tmp_path, {"name": "full", "source": {"format": "json", "path": str(landing),
                                                                 "schema": "id long, note string"},
                                      "sink": {"path": "bronze/full"}})
    spool = settings.ledger_spool
    assert spool == small_disk / "checkpoints" / "_ledger_spool"

    land(landing, "a.json", 0, 100, 20)
    first = run(spark, spec_path, settings, "first")
    assert (first["status"], first["output_rows"], first["ledger"]) == ("succeeded", 100, str(settings.ledger_path))
    assert (spool / ledger_spool.RESERVE).stat().st_size == ledger_spool.RESERVE_BYTES  # made by the append

    # ~12 MB of parquet to write, ~5 MB of room: the disk fills during the write
    filler = small_disk / "filler"
    free = _free_bytes(small_disk)
    filler.write_bytes(b"\0" * (free - 5 * 2**20))
    land(landing, "b.json", 100, 30_000, 400)
    capfd.readouterr()
    failed = run(spark, spec_path, settings, "full")
    err = capfd.readouterr().err
    assert failed["status"] == "failed"
    assert failed["error"].startswith("no space left on device while writing "), failed["error"]
    assert "free space on that disk" in failed["error"]
    assert "panicked" not in err and "Already shut down" not in err  # delta-rs' panics were held back
    # its ledger row could not be appended: it waits in the spool, written in the reserve's place
    assert failed["ledger_error"].startswith(f"could not append to the run ledger {settings.ledger_path}: ")
    pending = Path(failed["ledger_pending"])
    assert pending.parent.parent == spool and pending.is_file()
    assert not (spool / ledger_spool.RESERVE).exists()
    assert [s.run_id for _, s in ledger_spool.pending(spool, str(settings.ledger_path))] == ["full"]
    # the files its write left, named: none is in any commit
    orphans = failed["orphan_files"]
    named = orphans["tables"]["sink"]["paths"]
    assert orphans["count"] >= 1 and orphans["bytes"] > 0 and all(Path(p).is_file() for p in named)
    assert orphans["count"] == sum(t["count"] for t in orphans["tables"].values())

    # space returns; the next maintenance run deletes what the failed write left, and its ledger append takes
    # the waiting row with it
    filler.unlink()
    maintained = maintain_pipeline(spark, load_spec(spec_path), settings, maintain_job(run_id="maint")).to_json()
    assert maintained["status"] == "succeeded", maintained["error"]
    assert maintained["orphans_removed"] == {"files": orphans["count"], "bytes": orphans["bytes"]}
    assert not any(Path(p).exists() for p in named)
    assert maintained.get("ledger") == str(settings.ledger_path), maintained.get("ledger_error")
    assert ledger_spool.pending(spool, str(settings.ledger_path)) == [] and not pending.exists()
    assert (spool / ledger_spool.RESERVE).stat().st_size == ledger_spool.RESERVE_BYTES  # made again

    again = run(spark, spec_path, settings, "again")
    assert again["status"] == "succeeded", again["error"]
    table = spark.read.format("delta").load(str(settings.lake_root / "bronze" / "full"))
    assert Counter(r.id for r in table.select("id").collect()) == Counter(range(30_100))  # every row once

    rows = latest_runs(str(settings.ledger_path), "full", limit=10)
    by_id = Counter(r["run_id"] for r in rows)
    assert by_id == Counter({"first": 1, "full": 1, "maint": 1, "again": 1}), by_id
    late = {r["run_id"]: r["recorded_late"] for r in rows}
    assert late == {"first": False, "full": True, "maint": False, "again": False}
    (recorded,) = [r for r in rows if r["run_id"] == "full"]
    assert (recorded["status"], recorded["error"]) == ("failed", failed["error"])


def _free_bytes(path: Path) -> int:
    stat = os.statvfs(path)
    return stat.f_bavail * stat.f_frsize
