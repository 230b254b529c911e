"""The checkpoint's files, read and written through one layer (sluice.storage.checkpoint over sluice.storage.files).

The layout is Spark's own (the files below are what a file-source query writes); the Spark-level tests read
real checkpoints through the same class (tests/spark_jobs).
"""

from __future__ import annotations

import json
from pathlib import Path

from sluice.storage.checkpoint import SPEC_FILE, Checkpoint
from sluice.storage.files import Storage


def spark_checkpoint(root: Path, planned: int, done: int, compact_at: int | None = None) -> Path:
    """A file-source query's checkpoint: batches 0..planned-1 planned, 0..done-1 done, one file per batch."""
    (root / "offsets").mkdir(parents=True)
    (root / "commits").mkdir()
    (root / "sources" / "0").mkdir(parents=True)
    (root / "metadata").write_text('{"id":"q-1"}\n')
    for batch in range(planned):
        (root / "offsets" / str(batch)).write_text(
            "v1\n" + json.dumps({"batchWatermarkMs": 0}) + "\n" + json.dumps({"logOffset": batch}) + "\n")
    for batch in range(done):
        (root / "commits" / str(batch)).write_text("v1\n{}\n")
    entries = {b: json.dumps({"path": f"file:///in/{b}.json", "timestamp": 1000 + b, "batchId": b})
               for b in range(planned)}
    for batch in range(planned):
        if compact_at is not None and batch <= compact_at:
            continue
        (root / "sources" / "0" / str(batch)).write_text("v1\n" + entries[batch] + "\n")
    if compact_at is not None:
        (root / "sources" / "0" / f"{compact_at}.compact").write_text(
            "v1\n" + "\n".join(entries[b] for b in range(compact_at + 1)) + "\n")
    return root


def test_batches_offsets_and_the_source_log(tmp_path):
    cp = Checkpoint(str(spark_checkpoint(tmp_path / "cp", planned=5, done=4, compact_at=2)))

    assert (cp.query_id(), cp.planned(), cp.done(), cp.pending_batch()) == ("q-1", [0, 1, 2, 3, 4], [0, 1, 2, 3], 4)
    assert cp.last_offset() == {"logOffset": 3}  # the end of the last batch done
    assert cp.restart_offset() == {"logOffset": 2}  # a restart builds batch 3 again: it starts at batch 2's end
    assert [e["batchId"] for e in cp.source_log()] == [0, 1, 2, 3, 4]  # the compact file, then the batch files
    assert [e["path"] for e in cp.source_log(through=1)] == ["file:///in/0.json", "file:///in/1.json"]
    assert cp.files_of_batch(1) == ["file:///in/1.json"]  # folded into 2.compact
    assert cp.files_of_batch(4) == ["file:///in/4.json"]
    assert cp.files_of_batch(9) is None
    assert cp.size() == {"files": 1 + 5 + 4 + 3, "bytes": cp.size()["bytes"], "offsets": 5, "commits": 4}


def test_a_checkpoint_that_is_not_there_reads_as_empty(tmp_path):
    cp = Checkpoint(str(tmp_path / "none"))
    assert (cp.exists(), cp.query_id(), cp.planned(), cp.pending_batch(), cp.last_offset(), cp.restart_offset(),
            cp.source_log(), cp.size(), cp.recorded_query()) == (False, None, [], None, None, None, [], None, None)


def test_sluices_own_files_are_written_whole_and_read_back(tmp_path):
    cp = Checkpoint(str(tmp_path / "cp"))
    new_id = cp.ensure_query_id()
    assert cp.ensure_query_id() == new_id and cp.query_id() == new_id
    cp.record_query("orders", {"source": {"format": "json"}})
    assert json.loads((tmp_path / "cp" / SPEC_FILE).read_text()) == {"pipeline": "orders",
                                                                     "query": {"source": {"format": "json"}}}
    assert cp.recorded_query() == {"source": {"format": "json"}}
    cp.write("sluice_upstream_pending", '{"from_version": 3}')
    assert cp.read_json("sluice_upstream_pending") == {"from_version": 3}
    cp.delete("sluice_upstream_pending")
    cp.delete("sluice_upstream_pending")  # already gone: nothing happens
    assert cp.read("sluice_upstream_pending") is None
    assert sorted(p.name for p in (tmp_path / "cp").iterdir()) == ["metadata", SPEC_FILE]  # no temporary left


def test_a_driver_writes_through_its_writer(tmp_path):
    written = []

    class Recorder:
        def write_text(self, uri, text):
            written.append(("write", uri, text))

        def delete(self, uri):
            written.append(("delete", uri))

    cp = Checkpoint(str(tmp_path / "cp"), Recorder())
    cp.write("sluice_quarantine_pending", "7")
    cp.delete("sluice_quarantine_pending")
    assert written == [("write", f"{tmp_path}/cp/sluice_quarantine_pending", "7"),
                       ("delete", f"{tmp_path}/cp/sluice_quarantine_pending")]


def test_set_aside_keeps_the_old_checkpoint_beside_it(tmp_path):
    clock = iter([1_000_000.0, 2_000_000.0, 3_000_000.0])
    for _ in range(3):
        spark_checkpoint(tmp_path / "orders", planned=1, done=1)
        aside = Checkpoint(str(tmp_path / "orders")).set_aside("followed", keep_one=True, clock=lambda: next(clock))
    assert aside == f"{tmp_path}/orders.followed-19700204T172000"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["orders.followed-19700204T172000"]  # only the latest
    spark_checkpoint(tmp_path / "orders", planned=1, done=1)
    replaced = Checkpoint(str(tmp_path / "orders")).set_aside()
    assert Path(replaced).is_dir() and not (tmp_path / "orders").exists()


def test_storage_takes_file_uris_and_lists_numbered_files(tmp_path):
    store = Storage(f"file://{tmp_path}")
    store.write_text("sources", "0", "3.compact", "v1\n")
    store.write_text("sources", "0", "4", "v1\n")
    store.write_text("sources", "0", ".4.tmp", "")
    assert store.numbered("sources", "0") == [4]
    assert store.numbered("sources", "0", suffix=".compact") == [3]
    assert store.read_text("sources", "0", "4") == "v1\n" and store.read_text("nothing") is None
    assert (tmp_path / "sources" / "0" / "4").is_file()
