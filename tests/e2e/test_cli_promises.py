"""README promises through the real CLI (and Airflow): `sluice show`, `sluice maintain --dry-run / --wait`, the
maintenance task under `airflow tasks test`, relative reference tables from any folder, and `sluice run`
without Airflow when the Spark connection is in the environment."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

from sluice.storage.lock import launcher_lock
from tests.e2e.conftest import BIN, last_json_line, sluice, wait_for
from tests.helpers import (
    orders_spec,
    run_here,
    tree_digest,
    write_lines,
    write_orders,
    write_spec,
)

PROJECT = BIN.parent.parent


def two_runs(spark, lake) -> None:
    """Two runs made in-process (the set-up: the tests' subject is the later `sluice` process)."""
    spec = lake.pipelines_dir / "orders.yaml"
    landing = lake.lake_root / "landing" / "orders"
    write_orders(landing, "a.json", range(0, 3))
    write_lines(landing / "bad.json", ['{"id": 77, "amount": "lots"}'])
    assert run_here(spark, lake, spec, run_id="first")["status"] == "succeeded"
    write_orders(landing, "b.json", range(3, 5))
    assert run_here(spark, lake, spec, run_id="second")["status"] == "succeeded"


def test_sluice_show_prints_which_batch_wrote_which_version_the_rows_and_the_quarantine(lake, spark):
    write_spec(lake.pipelines_dir, orders_spec())
    two_runs(spark, lake)

    shown = sluice("show", "orders")
    assert shown.returncode == 0, shown.stderr[-3000:]
    out = shown.stdout
    assert f"== orders: Delta table {lake.lake_root / 'bronze' / 'orders'} (5 rows)" in out
    versions = {}
    for line in out.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 6 and cells[0].isdigit():  # version | timestamp | operation | mode | batch | rows_written
            versions[int(cells[0])] = (cells[2], cells[4], cells[5])
    # batch 0's write created the table: no empty version 0 before it
    assert versions[0] == ("WRITE", "0", "3") and versions[1] == ("WRITE", "1", "2") and 2 not in versions
    rows = [line for line in out.splitlines() if line.startswith("|") and "c" in line and "2026-11-0" in line]
    assert len(rows) == 5
    quarantine = lake.lake_root / "_quarantine" / "orders"
    assert f"== orders: quarantine {quarantine} (1 rows:" in out
    assert '{"id": 77, "amount": "lots"}' in out


def test_sluice_maintain_dry_run_changes_nothing_and_wait_waits_for_the_running_run(lake, spark):
    from deltalake import DeltaTable

    write_spec(lake.pipelines_dir, orders_spec())
    two_runs(spark, lake)
    table = lake.lake_root / "bronze" / "orders"
    before, version = tree_digest(table), DeltaTable(str(table)).version()

    dry = sluice("maintain", "orders", "--dry-run")
    assert dry.returncode == 0, dry.stderr[-3000:]
    summary = last_json_line(dry.stdout)
    assert {"files_compacted", "files_written", "files_removed", "bytes_removed", "tables", "checkpoint_size"} <= set(summary)
    assert (summary["status"], summary["dry_run"]) == ("succeeded", True)
    assert tree_digest(table) == before and DeltaTable(str(table)).version() == version

    holder = launcher_lock(lake.checkpoint_root, "orders", {"run_id": "held_by_the_test"}).acquire()
    try:
        refused = sluice("maintain", "orders", "--wait", "0")  # refused at once, naming the holder
        assert refused.returncode == 1
        assert "pipeline orders is already running" in refused.stderr and "held_by_the_test" in refused.stderr
        waiting = subprocess.Popen([str(BIN / "sluice"), "maintain", "orders", "--wait", "300"], text=True,
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=dict(os.environ),
                                   stdin=subprocess.DEVNULL)
        # it reaches the lock and waits there: its process has the lock file open (opened by the lock's acquire,
        # before which nothing of maintenance starts) and is still running a while later, with no commit made
        # and the lock file still naming the test as its holder
        lock_file = lake.checkpoint_root / "_locks" / "orders.lock"
        wait_for("the waiting `sluice maintain` to open the lock file",
                 lambda: waiting.poll() is None and _has_open(waiting.pid, lock_file), 180)
        time.sleep(3)
        assert waiting.poll() is None  # it cannot have run: the lock is held
        assert DeltaTable(str(table)).version() == version
        assert json.loads(lock_file.read_text(encoding="utf-8"))["run_id"] == "held_by_the_test"
    finally:
        holder.release()
    out, err = waiting.communicate(timeout=600)
    assert waiting.returncode == 0, err[-3000:]
    assert last_json_line(out)["status"] == "succeeded"
    assert DeltaTable(str(table)).version() > version  # OPTIMIZE compacted the runs' small files


def _has_open(pid: int, path) -> bool:
    """Whether process ``pid`` has ``path`` open (its /proc fd links)."""
    folder = Path(f"/proc/{pid}/fd")
    try:
        return any(os.readlink(folder / fd) == str(path) for fd in os.listdir(folder))
    except OSError:  # an fd closed meanwhile
        return False


def test_the_maintenance_task_under_airflow_tasks_test_is_a_dry_run(lake, airflow_db, spark):
    from deltalake import DeltaTable

    write_spec(lake.pipelines_dir, orders_spec())
    two_runs(spark, lake)
    table = lake.lake_root / "bronze" / "orders"
    before, version = tree_digest(table), DeltaTable(str(table)).version()
    task = sluice("airflow", "tasks", "test", "sluice_maintenance", "maintain_orders", "2026-11-25")
    output = task.stdout + task.stderr
    assert task.returncode == 0, output[-4000:]
    assert '"dry_run": true' in output
    assert tree_digest(table) == before and DeltaTable(str(table)).version() == version


def test_relative_reference_tables_resolve_from_the_project_folder_whatever_the_working_directory(lake, tmp_path):
    spec = orders_spec(transform={
        "tables": {"regions": {"format": "csv", "path": "include/reference/customer_regions.csv",
                               "schema": "customer STRING, region STRING", "options": {"header": True}}},
        "sql": "SELECT o.id, r.region FROM source o LEFT JOIN regions r ON o.customer = r.customer",
    })
    write_spec(lake.pipelines_dir, spec)
    write_lines(lake.lake_root / "landing" / "orders" / "a.json",
                ['{"id": 1, "customer": "c001"}', '{"id": 2, "customer": "c004"}'])
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    done = subprocess.run([str(BIN / "sluice"), "run", "orders"], cwd=elsewhere, capture_output=True, text=True,
                          env=dict(os.environ), stdin=subprocess.DEVNULL, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert last_json_line(done.stdout)["output_rows"] == 2
    from deltalake import DeltaTable

    rows = DeltaTable(str(lake.lake_root / "bronze" / "orders")).to_pyarrow_table().to_pylist()
    assert sorted((r["id"], r["region"]) for r in rows) == [(1, "south"), (2, "north")]


def test_sluice_run_does_not_import_airflow_when_the_spark_connection_is_in_the_environment(lake):
    write_spec(lake.pipelines_dir, orders_spec())
    write_orders(lake.lake_root / "landing" / "orders", "a.json", range(0, 4))
    script = ("import json, sys\nfrom sluice_cli.main import main\ncode = main(['run', 'orders'])\n"
              "print(json.dumps({'code': code, 'airflow': sorted(m for m in sys.modules if m.split('.')[0] == "
              "'airflow')}))\n")
    done = subprocess.run([str(BIN / "python"), "-c", script], capture_output=True, text=True, cwd=PROJECT,
                          env=dict(os.environ), stdin=subprocess.DEVNULL, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result == {"code": 0, "airflow": []}
    summary = json.loads(done.stdout.strip().splitlines()[-2])
    assert summary["output_rows"] == 4
