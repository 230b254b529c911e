"""A renamed pipeline (``previous_names``), in-process on real Spark and Delta: its table, checkpoint,
quarantine, lock, transactions and run history stay under its first name, so a rename moves nothing and
loses or doubles no row -- not even the batch a crash left committed in the table but not in the
checkpoint, which the run under the new name must skip as the old name's replay would have."""

from __future__ import annotations

from pathlib import Path

import pytest

from sluice.operations.ledger import latest_runs
from sluice.operations.status import show_status
from sluice.storage.lock import PipelineBusy, driver_lock
from spark_jobs.run.runner import RunFailed
from spark_jobs.sinks import guards
from tests.helpers import make_spec, orders_spec, write_lines, write_orders
from tests.spark_jobs.test_exactly_once import ids, properties, run


def _specs():
    # default locations: table <lake>/orders, checkpoint <root>/orders, quarantine _quarantine/orders
    old = make_spec(orders_spec(sink={}))
    new = make_spec(orders_spec(name="orders_v2", previous_names=["orders"], sink={}))
    return old, new


def test_a_renamed_pipeline_keeps_its_table_checkpoint_and_transactions_and_skips_the_old_names_replay(
        spark, lake, capsys):
    old, new = _specs()
    assert (new.identity, new.names) == ("orders", ["orders", "orders_v2"])
    for where in ("sink_path", "checkpoint_path", "quarantine_table_path"):
        assert getattr(new, where)(lake) == getattr(old, where)(lake)  # nothing moves
    landing = lake.lake_root / "landing" / "orders"
    write_orders(landing, "a.json", range(0, 10))
    write_lines(landing / "bad.json", ["{not json"])
    run(spark, old, lake, run_id="old-1")
    write_orders(landing, "b.json", range(10, 15))
    second = run(spark, old, lake, run_id="old-2")
    assert [b["batch_id"] for b in second["micro_batches"]] == [1]
    # the driver died after batch 1's Delta commit, before the checkpoint's commits/1
    checkpoint = Path(old.checkpoint_path(lake))
    (checkpoint / "commits" / "1").unlink()
    (checkpoint / "commits" / ".1.crc").unlink(missing_ok=True)
    cp_id = second["checkpoint_id"]

    write_orders(landing, "c.json", range(15, 20))
    renamed = run(spark, new, lake, run_id="new-1")

    assert renamed["skipped_batches"] == [1]  # the old name's transaction: the replay is skipped
    assert renamed["checkpoint_id"] == cp_id
    assert [b["batch_id"] for b in renamed["micro_batches"]] == [1, 2]  # the checkpoint's batch ids go on
    assert ids(spark, new, lake) == list(range(20))  # every row once
    assert spark.read.format("delta").load(new.quarantine_table_path(lake)).count() == 1
    # the table now records the new name (same checkpoint): the old spec, left somewhere, is refused
    assert guards.recorded_identity(properties(spark, new.sink_path(lake))) == ("orders_v2", cp_id)
    with pytest.raises(RunFailed, match="belongs to pipeline orders_v2, not orders"):
        run(spark, old, lake, run_id="old-3")

    # the history: the new name's status shows the runs of both names
    runs = latest_runs(str(lake.ledger_path), new.names)
    assert {(r["run_id"], r["pipeline"]) for r in runs} >= {("old-1", "orders"), ("old-2", "orders"),
                                                            ("new-1", "orders_v2")}
    assert [r["run_id"] for r in latest_runs(str(lake.ledger_path), "orders_v2")] == ["new-1"]
    capsys.readouterr()
    show_status(new, lake)
    out = capsys.readouterr().out
    assert out.startswith("== orders_v2 (earlier: orders): latest runs")
    assert "old-1" in out and "new-1" in out


def test_a_renamed_pipeline_shares_its_lock_with_its_old_name(spark, lake):
    """An old name's run still in flight (its Airflow task started before the spec changed) and the new
    name's first run would write one checkpoint: the lock is the identity's, so the second is refused."""
    old, new = _specs()
    write_orders(lake.lake_root / "landing" / "orders", "a.json", range(0, 3))
    with driver_lock(lake.checkpoint_root, old.identity, {"run_id": "old-in-flight"}):
        with pytest.raises(RunFailed, match="refused: pipeline orders is already running"):
            run(spark, new, lake)
        with pytest.raises(PipelineBusy):
            driver_lock(lake.checkpoint_root, new.identity, {"run_id": "x"}).acquire()
    assert run(spark, new, lake)["input_rows"] == 3


def test_a_renamed_pipelines_upstream_name_still_resolves_for_its_readers(lake):
    """A downstream spec that names the upstream by its old name reads the same table."""
    from sluice.spec.catalog import PipelineCatalog
    from tests.helpers import write_spec

    write_spec(lake.pipelines_dir, orders_spec(name="orders_v2", previous_names=["orders"], sink={}))
    write_spec(lake.pipelines_dir, {"name": "silver", "source": {"format": "delta", "pipeline": "orders"},
                                    "sink": {"path": "silver/orders"}})
    catalog = PipelineCatalog.load(lake.pipelines_dir)
    assert catalog.errors == []
    silver = catalog.with_upstream(catalog.get("silver"), lake)
    assert silver.source.path == str(lake.lake_root / "orders")
