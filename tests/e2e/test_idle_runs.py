"""A run with nothing to do starts no driver (``SLUICE_IDLE_RUNS=skip``, the default; sluice.operations.idle):
the launcher proves it from the checkpoint, the source and the tables, and writes the summary (``idle_run``) and
the ledger row itself. Anything new, changed or unsure starts the driver, which ingests exactly what waited."""

from __future__ import annotations

import os
import time

from sluice.operations.ledger import latest_runs
from tests.e2e.conftest import run_summary as run
from tests.e2e.conftest import sluice
from tests.helpers import (
    delta_version,
    kafka_spec,
    new_topic,
    orders_spec,
    produce,
    write_orders,
    write_spec,
)


def idle(summary: dict) -> bool:
    """Whether the run started no driver; a run that did has the driver's phases, and no idle_run."""
    if "idle_run" in summary:
        assert summary["idle_run"]["driver_started"] is False
        assert "spark_submit" not in summary["phases_s"] and "session" not in summary["phases_s"]
        return True
    assert "session" in summary["phases_s"], summary["phases_s"]
    return False


def rows(summary: dict) -> int:
    return summary["output_rows"]


def test_a_files_pipeline_with_nothing_new_starts_no_driver_and_anything_new_or_changed_starts_it(lake):
    landing = lake.lake_root / "landing" / "orders"
    write_orders(landing, "a.json", range(5))
    write_spec(lake.pipelines_dir, orders_spec())
    first = run("orders")
    assert (idle(first), rows(first)) == (False, 5)  # a first run

    nothing = run("orders")
    assert (idle(nothing), rows(nothing), nothing["batches"], nothing["status"]) == (True, 0, 0, "succeeded")
    assert nothing["idle_run"]["why"] == "no new or changed file among 1 listed (1 read before)"
    assert (nothing["idle_run"]["files_listed"], nothing["idle_run"]["files_known"]) == (1, 1)
    table = lake.lake_root / "bronze" / "orders"
    assert nothing["delta_version_before"] == nothing["delta_version_after"] == delta_version(table)
    assert nothing["checkpoint_id"] == first["checkpoint_id"]
    assert {k: nothing["backlog_before"][k] for k in ("source", "files", "bytes")} == {
        "source": "files", "files": 0, "bytes": 0}
    ledger = latest_runs(str(lake.ledger_path), "orders", limit=5)
    assert [(r["run_id"], r["status"], r["output_rows"]) for r in ledger][:2] == [
        (nothing["run_id"], "succeeded", 0), (first["run_id"], "succeeded", 5)]

    # a new file: the driver runs and takes exactly it
    write_orders(landing, "b.json", range(5, 8))
    more = run("orders")
    assert (idle(more), rows(more)) == (False, 3)
    assert idle(run("orders"))

    # hidden names are not input, for the check as for Spark: still idle
    write_orders(landing, "_c.json", range(100, 110))
    write_orders(landing / ".tmp", "d.json", range(100, 110))
    write_orders(landing, "e.json._COPYING_", range(100, 110))
    assert idle(run("orders"))

    # a file rewritten in place (its modification time changed): the driver runs, and reports it
    later = time.time() + 5
    os.utime(landing / "a.json", (later, later))
    changed = run("orders")
    assert idle(changed) is False
    assert changed["overwritten_files"]["count"] == 1
    # reported on every run while the file keeps its new time (the index holds the one it was read with)
    assert idle(run("orders")) is False


def test_a_changed_spec_a_pending_batch_and_the_setting_start_the_driver(lake, monkeypatch):
    landing = lake.lake_root / "landing" / "orders"
    write_orders(landing, "a.json", range(4))
    write_spec(lake.pipelines_dir, orders_spec())
    assert rows(run("orders")) == 4
    assert idle(run("orders"))

    write_spec(lake.pipelines_dir, orders_spec(description="the same orders, described"))
    assert idle(run("orders")) is False  # a spec its last run did not end with
    assert idle(run("orders"))

    monkeypatch.setenv("SLUICE_IDLE_RUNS", "run")
    assert idle(run("orders")) is False
    monkeypatch.delenv("SLUICE_IDLE_RUNS")

    # a batch planned and not marked done (a run killed between the table's commit and the checkpoint's):
    # the driver runs it again, Delta skips the commit it has, nothing is written twice
    write_orders(landing, "b.json", range(4, 6))
    assert rows(run("orders")) == 2
    commits = lake.checkpoint_root / "orders" / "commits"
    last = max(int(p.name) for p in commits.iterdir() if p.name.isdigit())
    for name in (str(last), f".{last}.crc"):  # as if it was never written
        (commits / name).unlink(missing_ok=True)
    again = run("orders")
    assert idle(again) is False
    assert (again["output_rows"], again["skipped_batches"]) == (0, [last])
    assert idle(run("orders"))

    monkeypatch.setenv("SLUICE_IDLE_RUNS", "sometimes")
    bad = sluice("run", "orders")
    assert bad.returncode != 0
    assert "SLUICE_IDLE_RUNS='sometimes' is not a choice" in bad.stderr


def test_kafka_and_a_delta_source_are_idle_until_a_record_or_an_upstream_version_waits(lake, kafka_broker):
    servers = kafka_broker.bootstrap_servers
    topic = new_topic(servers)
    produce(servers, topic, range(3))
    write_spec(lake.pipelines_dir, kafka_spec("korders", servers, topic))
    write_spec(lake.pipelines_dir, {"name": "silver", "source": {"format": "delta", "pipeline": "korders"},
                                    "sink": {"path": "silver/orders"}})
    assert rows(run("korders")) == 3
    assert rows(run("silver")) == 3

    nothing = run("korders")
    assert idle(nothing) and nothing["idle_run"]["partitions"] == 3
    assert nothing["backlog_before"]["offsets"] == 0
    upstream = run("silver")
    assert idle(upstream), upstream.get("idle_run")
    assert upstream["idle_run"]["upstream_version"] == delta_version(lake.lake_root / "korders")

    produce(servers, topic, range(3, 5))
    assert (idle(k := run("korders")), rows(k)) == (False, 2)
    assert (idle(s := run("silver")), rows(s)) == (False, 2)
    assert idle(run("korders")) and idle(run("silver"))
