"""Exactly-once under faults, in-process on real Spark and Delta: the MERGE sink and its replays, the
guards on checkpoint and table, a changed spec, the pipeline lock, the run ledger."""

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
from sluice.storage.checkpoint import Checkpoint
from sluice.storage.delta_log import DeltaLog
from sluice.storage.lock import PipelineBusy, driver_lock
from spark_jobs.run.runner import RunFailed, run_pipeline
from spark_jobs.sinks import guards
from spark_jobs.sinks.guards import CHECKPOINT_PROPERTY, PIPELINE_PROPERTY
from tests.helpers import (
    delta_version,
    make_spec,
    orders_spec,
    write_lines,
    write_orders,
)

CDC_SCHEMA = "id BIGINT, version BIGINT, status STRING, op STRING"


def run(spark, spec, lake, **options) -> dict:
    return run_pipeline(spark, spec, lake, run_job(trigger=spec.trigger, run_id=options.pop("run_id", "t"),
                                                      **options)).to_json()


def table(spark, spec, lake):
    return spark.read.format("delta").load(spec.sink_path(lake))


def rows(spark, spec, lake) -> list[tuple]:
    """The table's rows, without the (here always null) _rescued column of JSON sources."""
    return sorted(tuple(r) for r in table(spark, spec, lake).drop("_rescued").collect())


def ids(spark, spec, lake) -> list[int]:
    return sorted(r.id for r in table(spark, spec, lake).select("id").collect())


def cdc(folder: Path, name: str, changes: list[tuple[int, int, str, str]]) -> None:
    write_lines(folder / name, [json.dumps({"id": i, "version": v, "status": s, "op": o}) for i, v, s, o in changes])


def merge_spec(**sink) -> dict:
    return {
        "name": "accounts",
        "source": {"format": "json", "path": "landing/accounts", "schema": CDC_SCHEMA},
        "sink": {"mode": "merge", "keys": ["id"], **sink},
    }


def properties(spark, path: str) -> dict:
    from delta.tables import DeltaTable

    return DeltaTable.forPath(spark, path).detail().first()["properties"]


# --- the MERGE sink ------------------------------------------------------------------------------

def test_merge_upserts_by_key_and_the_greatest_order_by_wins(spark, lake):
    spec = make_spec(merge_spec(order_by="version", delete_when="op = 'D'"))
    landing = lake.lake_root / "landing" / "accounts"
    cdc(landing, "1.json", [(1, 1, "new", "I"), (2, 1, "new", "I"), (1, 3, "active", "U"), (1, 2, "stale", "U"),
                            (3, 1, "new", "I")])
    first = run(spark, spec, lake)
    assert first["input_rows"] == 5
    # within the batch: key 1's version 3 wins over versions 1 and 2, whatever their order in the file
    assert rows(spark, spec, lake) == [(1, 3, "active", "U"), (2, 1, "new", "I"), (3, 1, "new", "I")]
    assert first["micro_batches"][0]["merge"] == {"inserted": 3, "updated": 0, "deleted": 0}

    cdc(landing, "2.json", [(2, 2, "active", "U"), (1, 2, "older", "U"), (3, 2, "", "D"), (4, 1, "gone", "D"),
                            (5, 1, "new", "I")])
    second = run(spark, spec, lake)
    # against the table: key 1's version 2 is older than the table's 3 and changes nothing; key 3 is
    # deleted; key 4's deletion of a row that never existed inserts nothing
    assert rows(spark, spec, lake) == [(1, 3, "active", "U"), (2, 2, "active", "U"), (5, 1, "new", "I")]
    assert second["micro_batches"][0]["merge"] == {"inserted": 1, "updated": 1, "deleted": 1}
    assert second["output_rows"] == 3


def test_merge_without_order_by_keeps_the_last_row_of_a_key(spark, lake):
    spec = make_spec(merge_spec())
    landing = lake.lake_root / "landing" / "accounts"
    cdc(landing, "1.json", [(1, 1, "first", "I"), (1, 1, "second", "U"), (2, 1, "only", "I")])
    run(spark, spec, lake)
    assert rows(spark, spec, lake) == [(1, 1, "second", "U"), (2, 1, "only", "I")]


def test_a_replayed_merge_batch_is_skipped_by_its_delta_transaction_id(spark, lake):
    spec = make_spec(merge_spec(order_by="version"))
    landing = lake.lake_root / "landing" / "accounts"
    cdc(landing, "1.json", [(1, 1, "new", "I"), (2, 1, "new", "I")])
    run(spark, spec, lake)
    cdc(landing, "2.json", [(1, 2, "x", "U"), (3, 1, "new", "I")])
    second = run(spark, spec, lake)
    version = second["delta_version_after"]
    # the driver died after the MERGE of batch 1 committed, before the checkpoint's commits/1
    checkpoint = Path(spec.checkpoint_path(lake))
    (checkpoint / "commits" / "1").unlink()
    (checkpoint / "commits" / ".1.crc").unlink(missing_ok=True)
    # meanwhile someone changed row 3 by hand: a MERGE that ran again would overwrite it
    spark.sql(f"UPDATE delta.`{spec.sink_path(lake)}` SET status = 'by hand' WHERE id = 3")

    replay = run(spark, spec, lake)

    assert replay["skipped_batches"] == [1]
    assert replay["micro_batches"][0]["replay_of_version"] == version
    assert replay["delta_version_after"] == version + 1  # only the hand-made UPDATE: no new MERGE commit
    assert delta_version(spec.sink_path(lake)) == version + 1  # as delta-rs reads the table
    assert rows(spark, spec, lake) == [(1, 2, "x", "U"), (2, 1, "new", "I"), (3, 1, "by hand", "I")]
    assert (checkpoint / "commits" / "1").is_file()


def test_dry_run_of_a_merge_predicts_updates_against_the_real_rows(spark, lake):
    spec = make_spec(merge_spec())
    landing = lake.lake_root / "landing" / "accounts"
    cdc(landing, "1.json", [(1, 1, "new", "I"), (2, 1, "new", "I")])
    run(spark, spec, lake)
    cdc(landing, "2.json", [(1, 2, "x", "U"), (3, 1, "new", "I")])
    dry = run(spark, spec, lake, dry_run=True)
    assert dry["micro_batches"][0]["merge"] == {"inserted": 1, "updated": 1, "deleted": 0}
    assert rows(spark, spec, lake) == [(1, 1, "new", "I"), (2, 1, "new", "I")]  # the real table is untouched


# --- the table's identity and the checkpoint guards ------------------------------------------------

def landed_orders(spark, lake, **overrides):
    spec = make_spec(orders_spec(**overrides))
    landing = lake.lake_root / "landing" / "orders"
    write_orders(landing, "a.json", range(0, 10))
    first = run(spark, spec, lake)
    return spec, landing, first


def test_the_table_records_its_pipeline_and_checkpoint(spark, lake):
    spec, _, first = landed_orders(spark, lake)
    pipeline, cp_id = guards.recorded_identity(properties(spark, spec.sink_path(lake)))
    assert pipeline == "orders"
    assert cp_id == Checkpoint(spec.checkpoint_path(lake)).query_id() == first["checkpoint_id"]


def test_the_identity_is_read_from_either_name_the_plain_one_first():
    read = guards.recorded_identity
    assert read({PIPELINE_PROPERTY: "a", CHECKPOINT_PROPERTY: "1"}) == ("a", "1")  # created before the query
    assert read({"delta.sluice.pipeline": "a", "delta.sluice.checkpointid": "1"}) == ("a", "1")  # by its write
    assert read({"SLUICE.PIPELINE": "a", "sluice.checkpointid": "1"}) == ("a", "1")
    # a reset of a table its write created: set_identity's plain names replace the first write's
    assert read({"delta.sluice.pipeline": "a", "delta.sluice.checkpointid": "1", PIPELINE_PROPERTY: "a",
                 CHECKPOINT_PROPERTY: "2"}) == ("a", "2")
    assert read({"delta.appendOnly": "true"}) == (None, None)


def commit_actions(path: str, version: int) -> dict[str, list[dict]]:
    """The actions of one commit of the table's log, by kind (add, txn, metaData, commitInfo, ...)."""
    by_kind: dict[str, list[dict]] = {}
    for action in DeltaLog.open(path).actions(version):
        for kind, value in action.items():
            by_kind.setdefault(kind, []).append(value)
    return by_kind


def test_a_new_pipelines_first_write_creates_its_table_with_its_identity_in_one_commit(spark, lake):
    # no empty version 0 before the query: version 0 is batch 0 -- its rows, its transaction and the
    # pipeline's identity as delta.sluice.* properties (Delta lowercases the write option's key)
    spec, landing, first = landed_orders(spark, lake)
    table_path, cp_id = spec.sink_path(lake), first["checkpoint_id"]
    assert DeltaLog.open(table_path).versions() == [0]
    assert first["micro_batches"][0]["delta_version"] == 0 and first["output_rows"] == 10
    created = commit_actions(table_path, 0)
    assert created["txn"][0]["appId"] == f"sluice-orders-{cp_id}" and created["txn"][0]["version"] == 0
    assert len(created["add"]) >= 1
    assert created["metaData"][0]["configuration"] == {"delta.sluice.pipeline": "orders",
                                                       "delta.sluice.checkpointid": cp_id}
    assert ids(spark, spec, lake) == list(range(10))
    # the next run finds its identity there: its batch is the next version, no identity commit
    write_orders(landing, "b.json", range(10, 12))
    assert run(spark, spec, lake)["micro_batches"][0]["delta_version"] == 1
    assert DeltaLog.open(table_path).versions() == [0, 1] and "metaData" not in commit_actions(table_path, 1)


def test_the_first_write_allows_unknown_delta_properties_for_itself_only(spark, lake, tmp_path):
    # allowArbitraryProperties is set around the creating write, then restored: another write's unknown
    # delta.* key is still refused
    from spark_jobs.sinks.commit import ARBITRARY_PROPERTIES_CONF, Commit, NewTable
    from spark_jobs.sinks.table import write_rows

    rows = spark.createDataFrame([(1,)], "id BIGINT")
    write_rows(rows, str(tmp_path / "t"), Commit(0, new_table=NewTable({"delta.sluice.pipeline": "p"}, "c",
                                                                         rows.schema)))
    assert spark.conf.get(ARBITRARY_PROPERTIES_CONF, "false") == "false"
    assert properties(spark, str(tmp_path / "t")) == {"delta.sluice.pipeline": "p"}
    with pytest.raises(Exception, match="DELTA_UNKNOWN_CONFIGURATION"):
        rows.write.format("delta").option("delta.sluice.pipeline", "p").save(str(tmp_path / "u"))


def test_a_reset_of_a_table_its_first_write_created_records_the_new_checkpoint(spark, lake):
    spec, landing, first = landed_orders(spark, lake)
    reset = run(spark, spec, lake, reset=True)
    assert reset["checkpoint_id"] != first["checkpoint_id"]
    assert guards.recorded_identity(properties(spark, spec.sink_path(lake))) == ("orders", reset["checkpoint_id"])
    write_orders(landing, "b.json", range(10, 12))
    assert run(spark, spec, lake)["input_rows"] == 2  # not refused as another query's checkpoint
    assert ids(spark, spec, lake) == list(range(12))


def test_a_first_run_with_no_data_still_leaves_its_table_with_its_identity(spark, lake):
    spec = make_spec(orders_spec())
    (lake.lake_root / "landing" / "orders").mkdir(parents=True)
    first = run(spark, spec, lake, write_ledger=False)
    assert (first["batches"], first["delta_version_after"]) == (0, 0)  # created empty after the query
    identity = guards.recorded_identity(properties(spark, spec.sink_path(lake)))
    assert identity == ("orders", first["checkpoint_id"])
    write_orders(lake.lake_root / "landing" / "orders", "a.json", range(0, 4))
    assert run(spark, spec, lake, write_ledger=False)["micro_batches"][0]["delta_version"] == 1
    assert ids(spark, spec, lake) == list(range(4))


def test_a_first_write_killed_before_its_commit_leaves_no_table_and_the_rerun_is_exact(spark, lake):
    # kill -9 while batch 0's files are written: part files (and a _delta_log of Delta's temporary file), no
    # commit. No commit is no table: the rerun writes batch 0 as version 0, each row once.
    spec = make_spec(orders_spec())
    write_orders(lake.lake_root / "landing" / "orders", "a.json", range(0, 6))
    Checkpoint(spec.checkpoint_path(lake)).ensure_query_id()
    sink = Path(spec.sink_path(lake))
    (sink / "_delta_log").mkdir(parents=True)
    (sink / "_delta_log" / ".00000000000000000000.json.0b5e2b9e-5c1a-4a8e-9d2b-2f7c3a1e9d10.tmp").write_text("{}\n")
    (sink / "part-00000-0b5e2b9e-5c1a-4a8e-9d2b-2f7c3a1e9d10-c000.snappy.parquet").write_bytes(b"half a file")

    summary = run(spark, spec, lake, write_ledger=False)
    assert (summary["delta_version_before"], summary["micro_batches"][0]["delta_version"]) == (None, 0)
    assert ids(spark, spec, lake) == list(range(6))
    assert guards.recorded_identity(properties(spark, str(sink)))[0] == "orders"


def test_a_lost_checkpoint_is_refused_and_reset_rebuilds_the_table_from_the_source(spark, lake):
    spec, landing, _ = landed_orders(spark, lake)
    write_orders(landing, "b.json", range(10, 15))
    run(spark, spec, lake)
    checkpoint = Path(spec.checkpoint_path(lake))
    shutil.rmtree(checkpoint)
    write_orders(landing, "c.json", range(15, 20))

    with pytest.raises(RunFailed) as refused:
        run(spark, spec, lake)
    message = str(refused.value)
    assert message.startswith(f"refused: the checkpoint of orders ({checkpoint}) is missing or empty, but its table")
    assert "--reset-checkpoint" in message and "restore the checkpoint" in message
    assert refused.value.summary.refused is True
    assert ids(spark, spec, lake) == list(range(15))  # nothing was written
    assert not checkpoint.exists()  # nor a new checkpoint started

    reset = run(spark, spec, lake, reset=True)
    assert reset["mode"] == "reset"
    assert ids(spark, spec, lake) == list(range(20))  # the whole source, each row once: replaced, not appended
    assert run(spark, spec, lake)["input_rows"] == 0  # and incremental runs go on from the new checkpoint


def test_reset_keeps_the_old_checkpoint_beside_the_new_one(spark, lake):
    spec, landing, first = landed_orders(spark, lake)
    write_orders(landing, "b.json", range(10, 12))
    reset = run(spark, spec, lake, reset=True)
    aside = Path(reset["replaced_checkpoint"])
    assert aside.parent == Path(spec.checkpoint_path(lake)).parent and aside.name.startswith("orders.replaced-")
    assert Checkpoint(str(aside)).query_id() == first["checkpoint_id"] != reset["checkpoint_id"]
    assert ids(spark, spec, lake) == list(range(12))


def test_a_checkpoint_of_another_query_is_refused(spark, lake):
    spec, landing, _ = landed_orders(spark, lake)
    checkpoint = Path(spec.checkpoint_path(lake))
    # another query's checkpoint put in its place (a restore from the wrong backup)
    other = make_spec(orders_spec(name="other", sink={"path": "bronze/other"}))
    run(spark, other, lake)
    shutil.rmtree(checkpoint)
    shutil.copytree(other.checkpoint_path(lake), checkpoint)
    with pytest.raises(RunFailed) as refused:
        run(spark, spec, lake)
    assert "belongs to another query" in str(refused.value)
    assert Checkpoint(other.checkpoint_path(lake)).query_id() in str(refused.value)


def test_a_table_of_another_pipeline_is_refused(spark, lake):
    landed_orders(spark, lake)
    thief = make_spec(orders_spec(name="thief"))  # same sink.path bronze/orders
    with pytest.raises(RunFailed) as refused:
        run(spark, thief, lake)
    assert "the sink table" in str(refused.value) and "belongs to pipeline orders, not thief" in str(refused.value)
    with pytest.raises(RunFailed) as refused_reset:
        run(spark, thief, lake, reset=True)  # a reset would wipe the other pipeline's rows
    assert "belongs to pipeline orders, not thief" in str(refused_reset.value)
    assert ids(spark, make_spec(orders_spec()), lake) == list(range(10))


def test_a_changed_source_is_explained_before_spark_starts(spark, lake):
    spec, _, _ = landed_orders(spark, lake)
    moved = make_spec(orders_spec(source={**orders_spec()["source"], "path": "landing/orders_v2"}))
    (lake.lake_root / "landing" / "orders_v2").mkdir(parents=True)
    with pytest.raises(RunFailed) as refused:
        run(spark, moved, lake)
    message = str(refused.value)
    assert "changed in a way its checkpoint" in message
    assert f'the source (format, path or topics): was {{"format": "json", "path": "{lake.lake_root}/landing/orders"}}' in message
    assert "mode=reset" in message


def test_a_changed_stateful_query_is_refused_but_a_stateless_change_is_not(spark, lake):
    agg = {"sql": "SELECT customer, count(*) AS n FROM source GROUP BY customer"}
    spec, _, _ = landed_orders(spark, lake, transform=agg, sink={"mode": "complete"})
    changed = make_spec(orders_spec(transform={"sql": "SELECT customer, sum(amount) AS n FROM source GROUP BY customer"},
                                    sink={"mode": "complete"}))
    with pytest.raises(RunFailed) as refused:
        run(spark, changed, lake)
    assert "the stateful query (aggregation, distinct, join or window in transform.sql): was" in str(refused.value)

    plain, landing, _ = landed_orders(spark, lake, name="plain", sink={"path": "bronze/plain"})
    projected = make_spec(orders_spec(name="plain", sink={"path": "bronze/plain"},
                                      transform={"sql": "SELECT * FROM source WHERE amount >= 0"}))
    write_orders(landing, "b.json", range(10, 13))
    assert run(spark, projected, lake)["input_rows"] == 3


# --- the lock --------------------------------------------------------------------------------------

HOLD_LOCK = """
import sys, time
from pathlib import Path
from sluice.storage.lock import driver_lock
lock = driver_lock(Path(sys.argv[1]), "orders", {"run_id": "the-holder"}).acquire()
print("held", flush=True)
time.sleep(600)
"""


def test_a_second_run_is_refused_while_one_holds_the_pipeline_and_a_killed_holder_frees_it(spark, lake):
    spec = make_spec(orders_spec())
    write_orders(lake.lake_root / "landing" / "orders", "a.json", range(0, 5))
    holder = subprocess.Popen([sys.executable, "-c", HOLD_LOCK, str(lake.checkpoint_root)],
                              stdout=subprocess.PIPE, text=True, env={**os.environ})
    try:
        assert holder.stdout.readline().strip() == "held"
        started = time.monotonic()
        with pytest.raises(RunFailed) as refused:
            run(spark, spec, lake)
        assert time.monotonic() - started < 30  # refused at once, not after a wait
        message = str(refused.value)
        assert message.startswith(f"refused: pipeline orders is already running (pid {holder.pid} on ")
        assert "run the-holder" in message
        assert not Path(spec.sink_path(lake)).exists()
    finally:
        holder.send_signal(signal.SIGKILL)  # a killed run: no clean-up, no unlock
        holder.wait()
    assert run(spark, spec, lake)["input_rows"] == 5  # the kernel freed the lock with the process


def test_lock_is_exclusive_and_reusable(lake):
    first = driver_lock(lake.checkpoint_root, "p", {"run_id": "one"}).acquire()
    with pytest.raises(PipelineBusy) as busy:
        driver_lock(lake.checkpoint_root, "p", {"run_id": "two"}).acquire()
    assert busy.value.holder["run_id"] == "one"
    first.release()
    with driver_lock(lake.checkpoint_root, "p", {}):
        pass


# --- the run ledger --------------------------------------------------------------------------------

def test_every_run_appends_to_the_ledger_which_answers_which_run_wrote_a_version(spark, lake):
    spec, landing, first = landed_orders(spark, lake)
    write_orders(landing, "b.json", range(10, 14))
    dry = run(spark, spec, lake, dry_run=True, run_id="the-dry-run")
    second = run(spark, spec, lake, run_id="the-second", airflow={"dag_id": "orders", "dag_run_id": "manual__x",
                                                                  "try_number": 2})
    shutil.rmtree(spec.checkpoint_path(lake))
    with pytest.raises(RunFailed):
        run(spark, spec, lake, run_id="refused-one")

    ledger = spark.read.format("delta").load(str(lake.ledger_path)).where("pipeline = 'orders'")
    by_run = {r.run_id: r for r in ledger.collect()}
    assert set(by_run) == {"t", "the-dry-run", "the-second", "refused-one"}
    assert (by_run["the-dry-run"].mode, by_run["the-dry-run"].input_rows) == ("dry_run", 4)
    assert by_run["refused-one"].status == "failed" and "missing or empty" in by_run["refused-one"].error
    row = by_run["the-second"]
    assert (row.dag_id, row.dag_run_id, row.try_number, row.status) == ("orders", "manual__x", 2, "succeeded")
    assert (row.delta_version_before, row.delta_version_after, row.batch_ids) == (0, 1, [1])
    assert json.loads(row.summary)["run_id"] == "the-second"
    assert dry["input_rows"] == second["input_rows"] == 4

    # "which run wrote version 1, from which offsets / files?" is one query (a dry run's versions are its
    # scratch copy's: the dry run above wrote its version 1)
    answer = spark.sql(f"""
        SELECT l.run_id, b.batch_id, s.start_offset, s.end_offset, s.files
        FROM delta.`{lake.ledger_path}` l LATERAL VIEW explode(l.micro_batches) AS b
        LATERAL VIEW explode(b.sources) AS s
        WHERE l.pipeline = 'orders' AND NOT l.dry_run AND b.delta_version = 1""").collect()
    assert len(answer) == 1
    assert (answer[0].run_id, answer[0].batch_id) == ("the-second", 1)
    assert json.loads(answer[0].start_offset) == {"logOffset": 0}
    assert json.loads(answer[0].end_offset) == {"logOffset": 1}
    assert [Path(f).name for f in answer[0].files] == ["b.json"]
    assert first["ledger"] == str(lake.ledger_path)


def test_a_first_run_killed_while_creating_its_tables_is_not_a_broken_pipeline(spark, lake):
    # kill -9 right before the first Delta commit of the sink and of the quarantine table (their creation):
    # each is left a _delta_log with only Delta's temporary file (seen in `make chaos`); Delta calls such a
    # folder a Delta table, then fails to read it

    spec = make_spec(orders_spec())
    write_lines(lake.lake_root / "landing" / "orders" / "a.json",
                ['{"id": 1, "amount": 2.0}', '{"id": 2, "amount": 3.0}', '{"id": "x"}'])
    Checkpoint(spec.checkpoint_path(lake)).ensure_query_id()
    for path in (spec.sink_path(lake), spec.quarantine_table_path(lake)):
        log = Path(path) / "_delta_log"
        log.mkdir(parents=True)
        (log / ".00000000000000000000.json.0b5e2b9e-5c1a-4a8e-9d2b-2f7c3a1e9d10.tmp").write_text("{}\n")

    summary = run(spark, spec, lake, write_ledger=False)
    assert (summary["delta_version_before"], summary["input_rows"], summary["quarantined_rows"]) == (None, 3, 1)
    assert ids(spark, spec, lake) == [1, 2]
    assert spark.read.format("delta").load(spec.quarantine_table_path(lake)).count() == 1


def test_a_first_run_killed_while_writing_its_first_offsets_is_not_a_broken_pipeline(spark, lake):
    # kill -9 while Spark renames offsets/0 into place (seen in `make chaos`): Spark's temporary file stays in
    # offsets/, and a new query refuses a non-empty offsets folder (STATE_STORE_CHECKPOINT_LOCATION_NOT_EMPTY)
    spec = make_spec(orders_spec())
    write_orders(lake.lake_root / "landing" / "orders", "a.json", range(0, 5))
    offsets = Path(spec.checkpoint_path(lake)) / "offsets"
    offsets.mkdir(parents=True)
    (offsets / ".0.0b5e2b9e-5c1a-4a8e-9d2b-2f7c3a1e9d10.tmp").write_text("v1\n")
    (offsets / "..0.0b5e2b9e-5c1a-4a8e-9d2b-2f7c3a1e9d10.tmp.crc").write_bytes(b"crc")

    summary = run(spark, spec, lake, write_ledger=False)
    assert summary["input_rows"] == 5 and ids(spark, spec, lake) == list(range(5))
    assert sorted(p.name for p in offsets.iterdir() if not p.name.startswith(".")) == ["0"]
