"""Reading where a Delta source's stream stands, and which upstream commits changed rows, from the files
alone (no Spark): the checkpoint's offsets and the upstream table's log, as Spark and Delta write them."""

from __future__ import annotations

import json
from pathlib import Path

from spark_jobs.corrections.upstream import consumed_through, scan_changes, stream_start


def offset(checkpoint: Path, batch: int, version: int, index: int, done: bool = True) -> None:
    (checkpoint / "offsets").mkdir(parents=True, exist_ok=True)
    (checkpoint / "commits").mkdir(parents=True, exist_ok=True)
    source = {"sourceVersion": 1, "reservoirId": "r", "reservoirVersion": version, "index": index,
              "isStartingVersion": False}
    (checkpoint / "offsets" / str(batch)).write_text(f'v1\n{{"batchWatermarkMs":0}}\n{json.dumps(source)}\n')
    if done:
        (checkpoint / "commits" / str(batch)).write_text('v1\n{"nextBatchWatermarkMs":0}\n')


def commit(table: Path, version: int, *actions: dict) -> None:
    log = table / "_delta_log"
    log.mkdir(parents=True, exist_ok=True)
    (log / f"{version:020d}.json").write_text("".join(json.dumps(a) + "\n" for a in actions))


def test_the_version_a_stream_has_read_through_comes_from_its_last_batch_done(tmp_path):
    checkpoint = tmp_path / "cp"
    assert (consumed_through(str(checkpoint)), stream_start(str(checkpoint))) == (None, None)  # nothing done yet
    offset(checkpoint, 0, 2, -1)  # index -1: nothing of version 2 read yet
    assert (consumed_through(str(checkpoint)), stream_start(str(checkpoint))) == (1, 2)
    offset(checkpoint, 1, 5, -1)
    assert (consumed_through(str(checkpoint)), stream_start(str(checkpoint))) == (4, 2)  # a restart reads batch 1
    offset(checkpoint, 2, 7, 3, done=False)  # planned, not done: not read through
    assert consumed_through(str(checkpoint)) == 4
    offset(checkpoint, 2, 7, 3)  # done, but it ended inside version 7 (a rate-limited catch-up cut short)
    assert consumed_through(str(checkpoint)) is None
    offset(checkpoint, 3, 7, 2 ** 63 - 101)  # Delta's END_INDEX: version 7 read whole
    assert consumed_through(str(checkpoint)) == 7


def test_only_commits_that_removed_rows_are_changes_each_with_what_it_says_of_itself(tmp_path):
    table = tmp_path / "t"
    info = {"commitInfo": {"operation": "WRITE"}}
    commit(table, 0, info, {"add": {"path": "a", "dataChange": True}})
    commit(table, 1, {"commitInfo": {"operation": "OPTIMIZE"}}, {"remove": {"path": "a", "dataChange": False}},
           {"add": {"path": "b", "dataChange": False}})
    sliced = {"column": "day", "from": "2026-11-01T00:00:00+00:00", "to": "2026-11-03T00:00:00+00:00",
              "label": "2026-11-01..2026-11-02", "predicate": "`day` >= DATE'2026-11-01' AND `day` < DATE'2026-11-03'"}
    commit(table, 2, {"commitInfo": {"operation": "WRITE", "userMetadata": json.dumps({"sluice_slice": sliced})}},
           {"remove": {"path": "b", "dataChange": True}}, {"add": {"path": "c", "dataChange": True}})
    commit(table, 3, {"commitInfo": {"operation": "MERGE"}}, {"remove": {"path": "c"}})
    commit(table, 4, {"commitInfo": {"operation": "CREATE OR REPLACE TABLE"}}, {"remove": {"path": "d"}})
    commit(table, 5, {"commitInfo": {"operation": "UPDATE",
                                     "userMetadata": json.dumps({"sluice_promote_rescued": ["coupon"]})}},
           {"remove": {"path": "e"}})
    found = scan_changes(str(table), 1)
    assert [(c.version, c.operation, c.kind) for c in found] == [
        (2, "WRITE", "slice"), (3, "MERGE", "other"), (4, "CREATE OR REPLACE TABLE", "replace"), (5, "UPDATE", "promotion")]
    assert found[0].summary() == {"version": 2, "operation": "WRITE", "kind": "slice", "slice": "2026-11-01..2026-11-02",
                                  "column": "day"}
    assert found[3].promoted == ("coupon",)
    assert [c.version for c in scan_changes(str(table), 3, 4)] == [3, 4]
    assert scan_changes(str(tmp_path / "no-table"), 0) is None  # no log there: nothing followed


def test_a_reset_that_follows_an_upstream_rewrite_keeps_only_the_latest_old_checkpoint(tmp_path):
    from sluice.storage.checkpoint import Checkpoint

    checkpoint = tmp_path / "down"
    (tmp_path / "down.replaced-20261101T000000").mkdir()  # a user's reset: kept
    (tmp_path / "down.followed-20261101T000000").mkdir()
    checkpoint.mkdir()
    (checkpoint / "commits").mkdir()
    aside = Checkpoint(str(checkpoint)).set_aside("followed", keep_one=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["down.replaced-20261101T000000", Path(aside).name])
    assert (Path(aside) / "commits").is_dir() and ".followed-" in aside
