"""source.clean_source through `sluice run` (spark-submit): a driver halted -- as kill -9 would, by the
fault-injecting file system of the chaos tests -- after the sink's Delta commit and before the checkpoint's
commits/0 moves no file; the next run (made in-process: the halted one is the process this test is about) commits
the batch without writing it twice, then archives the file, and the ledger says so."""

from __future__ import annotations

import os
import subprocess

from bench.chaos import HALT_ENV, HALT_LINE, chaos_jar, chaos_spark_conf
from sluice.operations.ledger import latest_runs
from tests.e2e.conftest import BIN
from tests.helpers import orders_spec, run_here, write_orders, write_spec


def test_a_run_killed_between_its_commits_archives_nothing_and_the_next_run_archives_once(lake, spark):
    spec = orders_spec(spark_conf=chaos_spark_conf())
    spec["source"]["clean_source"] = {"mode": "archive", "archive_dir": "archive/orders", "retention": 0}
    spec_path = write_spec(lake.pipelines_dir, spec)
    landing, archive = lake.lake_root / "landing" / "orders", lake.lake_root / "archive" / "orders"
    landed = write_orders(landing, "a.json", range(0, 25))
    content = landed.read_text()
    checkpoint = lake.checkpoint_root / "orders"

    def sluice_run(**env: str) -> subprocess.CompletedProcess:
        # the fault-injecting file system on the driver's class path, as in the chaos runs; it halts only when told
        return subprocess.run([str(BIN / "sluice"), "run", str(spec_path)], capture_output=True, text=True,
                              timeout=600, stdin=subprocess.DEVNULL,
                              env={**os.environ, "SPARK_DIST_CLASSPATH": str(chaos_jar()), **env})

    halted = sluice_run(**{HALT_ENV: f"^{checkpoint}/commits/\\d+$"})

    assert HALT_LINE in halted.stderr and halted.returncode != 0, halted.stderr[-3000:]
    assert not (checkpoint / "commits" / "0").exists()
    assert landed.read_text() == content and not archive.exists()  # the table has the rows: the file stays

    summary = run_here(spark, lake, spec_path, run_id="after-kill")  # the next run, in-process

    assert summary["status"] == "succeeded", summary["error"]
    assert (summary["skipped_batches"], summary["input_rows"], summary["output_rows"]) == ([0], 0, 0)
    assert summary["cleaned_files"] == {
        "mode": "archive", "retention": "0s", "archive_dir": str(archive), "count": 1, "paths": [str(landed)],
        "waiting": 0, "skipped": 0, "skipped_paths": {}}
    assert not landed.exists() and (archive / "a.json").read_text() == content
    from deltalake import DeltaTable

    rows = DeltaTable(str(lake.lake_root / "bronze" / "orders")).to_pyarrow_table(columns=["id"]).to_pylist()
    assert sorted(r["id"] for r in rows) == list(range(25))
    runs = latest_runs(str(lake.ledger_path), "orders")
    assert [(r["status"], r["cleaned_files"], r["cleaned_paths"]) for r in runs] == [
        ("succeeded", 1, [str(landed)])]  # the halted run never got to write its row
