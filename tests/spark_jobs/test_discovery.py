"""source.discovery: index — sluice's own file discovery (jvm/files): each file once, its cost the new files', a
checkpoint of Spark's file source continued without a re-read; on real Spark and Delta, in-process."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path

from sluice.contract import run_job
from spark_jobs.run.runner import run_pipeline
from spark_jobs.sources.files import read_stream
from spark_jobs.sources.overwrites import source_log
from tests.helpers import make_spec, write_lines

SCHEMA = "id BIGINT, v STRING"


def spec_of(**source):
    return make_spec({"name": "found", "source": {"format": "json", "path": "landing/found", "schema": SCHEMA,
                                                   **source},
                      "sink": {"path": "bronze/found"}})


def land(lake, name: str, ids: list[int], *, age_days: int = 0) -> Path:
    path = write_lines(lake.lake_root / "landing" / "found" / name, [json.dumps({"id": i, "v": name}) for i in ids])
    if age_days:  # a late file: its modification time long before the files already ingested
        old = path.stat().st_mtime - age_days * 86400
        os.utime(path, (old, old))
    return path


def run(spark, spec, lake):
    return run_pipeline(spark, spec, lake, run_job(trigger=spec.trigger, run_id="t", write_ledger=False)).to_json()


def ids(spark, spec, lake) -> list[int]:
    return sorted(r.id for r in spark.read.format("delta").load(spec.sink_path(lake)).collect())


def test_each_file_once_and_only_the_new_ones_are_looked_at(spark, lake):
    spec = spec_of(max_files_per_trigger=2)
    assert spec.source.discovery == "index"  # the default
    for n in range(5):
        land(lake, f"dt=2026-11-0{n + 1}/f{n}.json", [n])
    land(lake, "_tmp/skipped.json", [100])  # hidden, as Spark's file source skips them
    land(lake, ".partial.json", [101])
    first = run(spark, spec, lake)
    assert (first["batches"], first["input_rows"]) == (3, 5)  # 2 + 2 + 1 files
    assert [len(b["sources"][0]["files"]) for b in first["micro_batches"]] == [2, 2, 1]
    assert first["discovery"]["files_indexed"] == 5 and first["discovery"]["new_files"] == 5
    assert first["discovery"]["listings"] == 1  # Trigger.AvailableNow: listed once, taken 2 files a batch
    assert first["discovery"]["list_requests"] == 6  # the folder and its 5 partition folders, not _tmp
    assert ids(spark, spec, lake) == [0, 1, 2, 3, 4]

    land(lake, "dt=2026-11-01/late.json", [5], age_days=400)  # older than everything ingested: still new
    second = run(spark, spec, lake)
    assert (second["input_rows"], second["discovery"]["new_files"], second["discovery"]["files_indexed"]) == (1, 1, 6)
    assert second["discovery"]["restored_from_log"] == 5  # the batch lists after the index's last snapshot

    nothing = run(spark, spec, lake)
    assert (nothing["batches"], nothing["input_rows"], nothing["discovery"]["new_files"]) == (0, 0, 0)
    assert ids(spark, spec, lake) == [0, 1, 2, 3, 4, 5]
    # the checkpoint's source log has the form of Spark's file source: what reads it (backlog, overwrites,
    # clean_source, the summary's files) reads this one
    log = source_log(spec.checkpoint_path(lake))
    assert sorted(Path(e["path"].removeprefix("file://")).name for e in log) == [
        "f0.json", "f1.json", "f2.json", "f3.json", "f4.json", "late.json"]
    assert sorted({e["batchId"] for e in log}) == [0, 1, 2, 3]


def test_the_stream_has_the_columns_of_sparks_file_source(spark, lake):
    # partition folders (dt=2026-11-01) are columns, typed the same way; a text source's line is `value`
    land(lake, "dt=2026-11-01/a.json", [1])
    columns = {}
    for discovery in ("index", "spark"):
        spec = make_spec({"name": "lines", "source": {"format": "text", "path": "landing/found",
                                                       "discovery": discovery}, "sink": {"path": "bronze/lines"}})
        columns[discovery] = read_stream(spark, spec, lake).schema.simpleString()
    assert columns["index"] == columns["spark"] == "struct<value:string,dt:date>"


def test_a_checkpoint_of_sparks_file_source_continues_without_a_reread(spark, lake):
    # a pipeline that ran on Spark's file source (the only one before sluice's index), with a compacted log
    old = spec_of(max_files_per_trigger=1, discovery="spark")
    for n in range(12):
        land(lake, f"f{n:02d}.json", [n])
    assert run(spark, old, lake)["batches"] == 12
    folder = Path(old.checkpoint_path(lake)) / "sources" / "0"
    assert sorted(p.name for p in folder.glob("*.compact")) == ["9.compact"]
    land(lake, "f12.json", [12])
    land(lake, "f13.json", [13])
    moved = run(spark, spec_of(max_files_per_trigger=1), lake)
    assert (moved["input_rows"], moved["discovery"]["new_files"], moved["discovery"]["files_indexed"]) == (2, 2, 14)
    assert [b["sources"][0]["start_offset"] for b in moved["micro_batches"]] == [{"logOffset": 11}, {"logOffset": 12}]
    assert ids(spark, old, lake) == list(range(14))  # nothing read twice, nothing missed
    # Spark's log was read once, into the index's snapshot: the next run reads that and the lists after it
    assert sorted(p.name for p in (folder / "index").iterdir() if not p.name.startswith(".")) == ["seen-11"]
    land(lake, "f14.json", [14])
    after = run(spark, spec_of(), lake)["discovery"]
    assert (after["files_indexed"], after["restored_from_log"], after["new_files"]) == (15, 2, 1)
    assert ids(spark, old, lake) == list(range(15))


def test_an_index_ahead_of_the_offsets_gives_the_batch_it_listed(spark, lake):
    # A kill after the index wrote a batch's list and before Spark wrote the batch's offset: the next run
    # takes that list as the batch (its files are in the index: the listing finds nothing new).
    spec = spec_of()
    land(lake, "a.json", [1])
    run(spark, spec, lake)
    land(lake, "b.json", [2])
    run(spark, spec, lake)
    checkpoint = Path(spec.checkpoint_path(lake))
    for log in ("offsets", "commits"):  # as if the second run had died after the index's list 1
        for name in ("1", ".1.crc"):
            (checkpoint / log / name).unlink(missing_ok=True)
    again = run(spark, spec, lake)
    assert [b["sources"][0]["files"] for b in again["micro_batches"]] == [
        [f"file://{lake.lake_root}/landing/found/b.json"]]
    assert again["skipped_batches"] == [1]  # Delta had its transaction: the replay wrote nothing twice
    assert again["discovery"]["batch_lists_read"] == 1  # that list, written by the run before


def test_a_restart_after_a_compact_batch_reads_no_file_list(spark, lake):
    # Spark asks the source again for the last committed batch at every restart and drops the answer: when that
    # batch is a compaction batch, its files were read back from a compact file of every file ever found. They
    # are read only when a batch is planned, and a batch listed in the same run is planned from memory.
    spec = spec_of(max_files_per_trigger=1)
    for n in range(10):
        land(lake, f"f{n}.json", [n])
    first = run(spark, spec, lake)
    assert (first["batches"], first["discovery"]["batch_lists_read"]) == (10, 0)
    folder = Path(spec.checkpoint_path(lake)) / "sources" / "0"
    assert sorted(p.name for p in folder.glob("*.compact")) == ["9.compact"]  # the last committed batch
    land(lake, "f10.json", [10])
    second = run(spark, spec, lake)
    assert (second["input_rows"], second["discovery"]["batch_lists_read"]) == (1, 0)
    assert ids(spark, spec, lake) == list(range(11))


def test_the_backlog_before_and_after_is_the_sources_own_listing_and_what_sluice_backlog_says(spark, lake,
                                                                                             monkeypatch):
    # the backlog before is the query's first listing's new files; the one after, another listing against the
    # index: files that landed while the query ran, equal to what `sluice backlog` (Python, the log's text) says
    from sluice.operations.backlog import measure
    from spark_jobs.run import runner

    spec = make_spec({"name": "found", "sink": {"path": "bronze/found"}, "source": {
        "format": "json", "path": "landing/found", "schema": SCHEMA, "options": {"pathGlobFilter": "*.json"}}})
    taken = [land(lake, f"f{n}.json", [n], age_days=3 - n) for n in range(3)]
    land(lake, "_tmp/hidden.json", [100])  # not input, in neither backlog
    land(lake, "notes.txt", [101])
    late: list[Path] = []
    query = runner._run_query

    def then_more_land(run):  # files that land after the query's listing, while the run is still on
        query(run)
        late.extend(land(lake, f"late{n}.json", [10 + n], age_days=5 - n) for n in range(2))
        land(lake, "_tmp/hidden2.json", [102])

    monkeypatch.setattr(runner, "_run_query", then_more_land)
    first = run(spark, spec, lake)
    assert (first["batches"], first["input_rows"]) == (1, 3)
    assert {k: first["backlog_before"][k] for k in ("source", "files", "bytes", "oldest_at")} == {
        "source": "files", "files": 3, "bytes": sum(p.stat().st_size for p in taken), "oldest_at": iso(taken[0])}
    python = measure(spec, lake)
    assert {k: first["backlog_after"][k] for k in ("source", "files", "bytes", "oldest_at")} == {
        k: python[k] for k in ("source", "files", "bytes", "oldest_at")} == {
        "source": "files", "files": 2, "bytes": sum(p.stat().st_size for p in late), "oldest_at": iso(late[0])}
    monkeypatch.undo()
    second = run(spark, spec, lake)
    assert (second["input_rows"], second["backlog_before"]["files"], second["backlog_after"]["files"]) == (2, 2, 0)


def iso(path: Path) -> str:
    return datetime.fromtimestamp(int(path.stat().st_mtime), UTC).isoformat()
