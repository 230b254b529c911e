"""A landing file rewritten after it was ingested (source.on_overwrite): reported, refused or ingested again,
on real Spark and Delta, in-process."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from sluice.contract import run_job
from spark_jobs.run.runner import RunFailed, run_pipeline
from spark_jobs.sources.overwrites import (
    companion_checkpoint,
    find_rewritten,
    find_rewritten_indexed,
    list_indexed,
    local_file,
    source_log,
    staging_folder,
)
from tests.helpers import make_spec, tree_digest, write_lines

SCHEMA = "id BIGINT, v STRING"


def spec_of(on_overwrite: str | None = None, **overrides):
    source = {"format": "json", "path": "landing/items", "schema": SCHEMA}
    if on_overwrite:
        source["on_overwrite"] = on_overwrite
    return make_spec({"name": "items", "source": source, "sink": {"path": "bronze/items"}, **overrides})


def land(lake, name: str, rows: list[tuple[int, str]], *, later_by_s: int = 0) -> Path:
    """Write (or rewrite in place) a landing file; ``later_by_s`` moves its modification time forward, as a
    producer's rewrite some time after the first export does."""
    path = write_lines(lake.lake_root / "landing" / "items" / name, [json.dumps({"id": i, "v": v}) for i, v in rows])
    if later_by_s:
        stat = path.stat()
        os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + later_by_s * 1_000_000_000))
    return path


def run(spark, spec, lake, dry_run=False):
    return run_pipeline(spark, spec, lake, run_job(trigger=spec.trigger, dry_run=dry_run, run_id="t",
                                                      write_ledger=False)).to_json()


def rows(spark, spec, lake) -> list[tuple[int, str]]:
    table = spark.read.format("delta").load(spec.sink_path(lake))
    return sorted((r.id, r.v) for r in table.collect())


def test_a_rewritten_file_is_reported_not_silently_ignored(spark, lake):
    spec = spec_of()  # on_overwrite: warn, the default
    landed = land(lake, "f.json", [(1, "a"), (2, "b")])
    land(lake, "gone.json", [(9, "z")])
    first = run(spark, spec, lake)
    assert first["input_rows"] == 3
    assert first["overwritten_files"] == {"checked": True, "count": 0, "paths": [], "action": "warn"}

    land(lake, "f.json", [(1, "a2"), (2, "b2"), (3, "c")], later_by_s=5)
    (lake.lake_root / "landing" / "items" / "gone.json").unlink()  # deleted after ingestion: not an overwrite
    land(lake, "new.json", [(4, "d")])  # a new name is new input, as ever
    second = run(spark, spec, lake)
    assert (second["input_rows"], second["output_rows"]) == (1, 1)
    assert second["overwritten_files"] == {"checked": True, "count": 1, "paths": [str(landed)], "action": "warn"}
    assert rows(spark, spec, lake) == [(1, "a"), (2, "b"), (4, "d"), (9, "z")]  # the new content is not ingested

    # reported on every run while the file differs from what was ingested
    assert run(spark, spec, lake)["overwritten_files"]["count"] == 1


def test_on_overwrite_fail_refuses_the_run_before_anything_is_written(spark, lake):
    spec = spec_of("fail")
    landed = land(lake, "f.json", [(1, "a"), (2, "b")])
    run(spark, spec, lake)
    land(lake, "f.json", [(1, "a2"), (2, "b2"), (3, "c")], later_by_s=5)
    land(lake, "new.json", [(4, "d")])
    checkpoint = Path(spec.checkpoint_path(lake))
    before = tree_digest(checkpoint)

    with pytest.raises(RunFailed) as failed:
        run(spark, spec, lake)
    error = failed.value.summary.error
    assert error.startswith("source.on_overwrite: fail: 1 landing file(s) were rewritten after they were ingested: "
                            f"{landed} (ingested as modified at ")
    assert "Nothing was written and the checkpoint did not advance" in error
    assert "set source.on_overwrite: reingest" in error and "or warn" in error
    assert failed.value.summary.overwritten_files["paths"] == [str(landed)]
    assert tree_digest(checkpoint) == before
    assert rows(spark, spec, lake) == [(1, "a"), (2, "b")]  # not even the new file


def test_reingest_into_an_append_sink_ingests_each_version_once(spark, lake):
    spec = spec_of("reingest")
    land(lake, "f.json", [(1, "a"), (2, "b")])
    run(spark, spec, lake)
    land(lake, "f.json", [(1, "a2"), (2, "b2"), (3, "c")], later_by_s=5)
    land(lake, "new.json", [(4, "d")])

    second = run(spark, spec, lake)
    assert second["overwritten_files"]["count"] == 1 and second["overwritten_files"]["copied"] == 1
    assert (second["reingest"]["batches"], second["reingest"]["input_rows"]) == (1, 3)
    assert (second["input_rows"], second["output_rows"]) == (4, 4)  # the new file's row and the new version's 3
    # an append sink keeps the old rows too (a merge sink replaces them: the next test)
    assert rows(spark, spec, lake) == [(1, "a"), (1, "a2"), (2, "b"), (2, "b2"), (3, "c"), (4, "d")]
    assert not [p for p in Path(staging_folder(spec.checkpoint_path(lake))).rglob("*") if p.is_file()]  # copy deleted

    third = run(spark, spec, lake)  # the same version: done, not reported, not ingested again
    assert (third["input_rows"], third["overwritten_files"]["count"]) == (0, 0)
    assert "reingest" not in third

    land(lake, "f.json", [(1, "a3")], later_by_s=10)  # a third version: once more
    fourth = run(spark, spec, lake)
    assert (fourth["input_rows"], fourth["overwritten_files"]["count"]) == (1, 1)
    assert rows(spark, spec, lake).count((1, "a3")) == 1


def test_reingest_into_a_merge_sink_replaces_the_corrected_rows(spark, lake):
    spec = spec_of("reingest", sink={"path": "bronze/items", "mode": "merge", "keys": ["id"]})
    land(lake, "f.json", [(1, "a"), (2, "b")])
    land(lake, "g.json", [(5, "e")])
    run(spark, spec, lake)
    land(lake, "f.json", [(1, "a2"), (2, "b2"), (3, "c")], later_by_s=5)

    run(spark, spec, lake)
    assert rows(spark, spec, lake) == [(1, "a2"), (2, "b2"), (3, "c"), (5, "e")]  # the new id once
    assert run(spark, spec, lake)["input_rows"] == 0


def test_reingested_bad_records_go_to_the_quarantine_table(spark, lake):
    spec = spec_of("reingest")
    landed = land(lake, "f.json", [(1, "a")])
    run(spark, spec, lake)
    write_lines(landed, ['{"id": 2, "v": "b"}', '{"id": "two", "v": "c"}'])
    os.utime(landed, ns=(landed.stat().st_atime_ns, landed.stat().st_mtime_ns + 5_000_000_000))

    second = run(spark, spec, lake)
    assert (second["input_rows"], second["quarantined_rows"]) == (2, 1)
    quarantined = spark.read.format("delta").load(spec.quarantine_table_path(lake)).collect()
    assert [(q.raw, q.batch_id) for q in quarantined] == [('{"id": "two", "v": "c"}', 0)]
    assert Path(quarantined[0].source).name.startswith("f.sluice-v")  # the version's copy, named after the file
    assert rows(spark, spec, lake) == [(1, "a"), (2, "b")]


def test_a_dry_run_reports_and_predicts_a_reingest_without_touching_anything(spark, lake):
    spec = spec_of("reingest")
    land(lake, "f.json", [(1, "a"), (2, "b")])
    run(spark, spec, lake)
    landed = land(lake, "f.json", [(1, "a2"), (2, "b2"), (3, "c")], later_by_s=5)
    checkpoint = Path(spec.checkpoint_path(lake))
    before = tree_digest(checkpoint)

    dry = run(spark, spec, lake, dry_run=True)
    assert dry["overwritten_files"]["paths"] == [str(landed)]
    assert (dry["input_rows"], dry["reingest"]["input_rows"]) == (3, 3)
    assert tree_digest(checkpoint) == before  # no copy, no companion checkpoint in the real one
    assert rows(spark, spec, lake) == [(1, "a"), (2, "b")]
    assert run(spark, spec, lake)["input_rows"] == 3  # the real run does what the dry run said


def test_the_source_log_is_read_across_compactions(spark, lake):
    # Spark's file source folds its log into <n>.compact every 10 batches: files of every batch stay known
    spec = spec_of(source={"format": "json", "path": "landing/items", "schema": SCHEMA, "max_files_per_trigger": 1,
                           "discovery": "spark"})
    for n in range(12):
        land(lake, f"f{n:02d}.json", [(n, "x")])
    assert run(spark, spec, lake)["batches"] == 12
    checkpoint = spec.checkpoint_path(lake)
    assert sorted(p.name for p in (Path(checkpoint) / "sources" / "0").glob("*.compact")) == ["9.compact"]
    assert len(source_log(checkpoint)) == 12
    rewritten = land(lake, "f03.json", [(3, "y")], later_by_s=5)
    assert [r.path for r in find_rewritten(spec.source_path(lake), checkpoint)] == [str(rewritten)]


def test_with_the_discovery_index_the_check_reads_its_times_and_finds_what_the_logs_text_finds(spark, lake):
    # source.discovery: index checks against the times in its snapshot (jvm/files Rewrites), not the log's text:
    # the same files as the log's reading, across a compaction, a deletion and a rewrite within the second
    spec = spec_of(source={"format": "json", "path": "landing/items", "schema": SCHEMA, "max_files_per_trigger": 1})
    landed = [land(lake, f"f{n:02d}.json", [(n, "x")]) for n in range(12)]
    assert run(spark, spec, lake)["batches"] == 12
    checkpoint = spec.checkpoint_path(lake)
    assert sorted(p.name for p in (Path(checkpoint) / "sources" / "0").glob("*.compact")) == ["9.compact"]
    assert find_rewritten_indexed(spark, spec.source_path(lake), checkpoint, {}) == []
    ingested = [p.stat().st_mtime_ns // 1_000_000 for p in landed]
    land(lake, "f03.json", [(3, "y")], later_by_s=5)  # in the compact file's batches
    land(lake, "f11.json", [(11, "y")], later_by_s=5)  # in a batch list after it
    stat = landed[7].stat()  # a millisecond later: a rewrite on a local disk
    os.utime(landed[7], ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    landed[5].unlink()  # gone: not a rewrite
    land(lake, "new.json", [(99, "n")])  # not found before: new input, not a rewrite
    python = find_rewritten(spec.source_path(lake), checkpoint)
    indexed = find_rewritten_indexed(spark, spec.source_path(lake), checkpoint, {})
    assert indexed == python and [r.path for r in indexed] == [str(landed[n]) for n in (3, 7, 11)]
    assert [(r.ingested_mtime_ms, r.mtime_ms, r.size) for r in indexed] == [
        (ingested[n], landed[n].stat().st_mtime_ns // 1_000_000, landed[n].stat().st_size) for n in (3, 7, 11)]
    assert indexed[1].mtime_ms - indexed[1].ingested_mtime_ms == 1
    # pathGlobFilter: what the source does not take is not checked either; a batch read again is not a rewrite
    assert find_rewritten_indexed(spark, spec.source_path(lake), checkpoint, {"pathGlobFilter": "f0*"}) == \
        [r for r in python if Path(r.path).name.startswith("f0")]
    assert [r.path for r in find_rewritten_indexed(spark, spec.source_path(lake), checkpoint, {}, rereading=11)] \
        == [str(landed[n]) for n in (3, 7)]
    # the same listing counts the files the index has not seen (new input: one; a hidden name is no input), and
    # its answer handed in is the check's
    land(lake, "_hidden.json", [(98, "h")])
    future = spark._jvm.java.util.concurrent.CompletableFuture
    for names_first in ("1000000", "1"):  # one walk that looks at every file; names first (a large index)
        spark.conf.set("spark.sluice.rewrites.namesFirstFiles", names_first)
        try:
            any_unseen, found = [future() for _ in range(3)], [future() for _ in range(3)]
            listed = list_indexed(spark, spec.source_path(lake), checkpoint, {}, any_unseen=any_unseen[0],
                                  found=found[0])
            assert listed["unseen"] == 1 and len(listed["rewritten"]) == 3
            assert list_indexed(spark, spec.source_path(lake), checkpoint, {"pathGlobFilter": "f*"},
                                any_unseen=any_unseen[1], found=found[1])["unseen"] == 0
            assert find_rewritten_indexed(spark, spec.source_path(lake), checkpoint, {}, listed=listed) == indexed
            assert list_indexed(spark, spec.source_path(lake), str(lake.checkpoint_root / "none"), {},
                                any_unseen=any_unseen[2], found=found[2]) == {"rewritten": [], "unseen": -1}
        finally:
            spark.conf.unset("spark.sluice.rewrites.namesFirstFiles")
        # the futures the head start waits on: whether a new file was met, the count of new files (-1: nothing
        # was listed)
        assert [f.getNow(None) for f in any_unseen] == [True, False, False]
        assert [f.getNow(None) for f in found] == [1, 0, -1]


@pytest.fixture(params=["one walk", "names first"])
def names_first(request, spark):
    """The rewritten-file check's two ways on a local disk (jvm/files Rewrites): one walk that looks at every
    file, and, from an index of spark.sluice.rewrites.namesFirstFiles files, the new files from the names first."""
    if request.param == "names first":
        spark.conf.set("spark.sluice.rewrites.namesFirstFiles", "1")
    yield request.param
    spark.conf.unset("spark.sluice.rewrites.namesFirstFiles")


def test_a_run_with_new_files_computes_the_tables_state_beside_its_preparing_and_one_without_does_not(
        spark, lake, monkeypatch, names_first):
    # the head start (spark_jobs.run.head_start): the rewritten-file check's listing on a thread of its own; when
    # it finds new files and the table exists, Delta's state of the table too, before the batch's write asks it
    from spark_jobs.run import head_start

    warmed = []

    def warm_state(session, path):
        warmed.append(path)
        real_warm_state(session, path)

    real_warm_state = head_start.warm_state
    monkeypatch.setattr(head_start, "warm_state", warm_state)
    from spark_jobs.run import overwrite_check

    deferred = []  # on_overwrite: warn's report taken after the query, its listing's stat of every file beside it

    def check(*args):
        checked = real_check(*args)
        deferred.append(checked.report is not None)
        return checked

    real_check = overwrite_check.check
    monkeypatch.setattr(overwrite_check, "check", check)
    spec = spec_of()
    landed = land(lake, "a.json", [(1, "a")])
    assert run(spark, spec, lake)["input_rows"] == 1 and warmed == []  # no table yet: nothing to compute
    assert run(spark, spec, lake)["input_rows"] == 0 and warmed == []  # nothing new: not computed
    land(lake, "b.json", [(2, "b")])
    stat = landed.stat()
    os.utime(landed, ns=(stat.st_atime_ns, stat.st_mtime_ns + 5_000_000_000))
    summary = run(spark, spec, lake)
    assert warmed == [spec.sink_path(lake)]
    assert summary["input_rows"] == 1 and summary["overwritten_files"]["paths"] == [str(landed)]
    # the check's listing was the query's first: the folder walked once, b.json found by it
    assert summary["discovery"]["listed_before_query"] is True and summary["discovery"]["listings"] == 1
    assert summary["backlog_before"]["files"] == 1
    assert rows(spark, spec, lake) == [(1, "a"), (2, "b")]
    land(lake, "c.json", [(3, "c")])
    dry = run(spark, spec, lake, dry_run=True)  # a dry run: no head start, its query lists
    assert (dry["input_rows"], dry["discovery"]["listed_before_query"], len(warmed)) == (1, False, 1)
    assert run(spark, spec, lake)["input_rows"] == 1 and rows(spark, spec, lake) == [(1, "a"), (2, "b"), (3, "c")]
    # every real run's report came after its query; the dry run (no head start) checked before its query
    assert deferred == [True, True, True, False, True]


def test_the_tables_state_is_computed_in_a_copy_of_the_session_the_caller_keeps_its_own(spark, lake):
    # warm_state interprets the state's expressions in a copy of the session (spark_jobs.sinks.delta_table):
    # Delta's snapshot is computed, and the caller's session, its settings and the thread's active session
    # are as they were
    from spark_jobs.sinks.delta_table import warm_state

    spec = spec_of()
    land(lake, "a.json", [(1, "a")])
    run(spark, spec, lake)
    jvm, key = spark._jvm, "spark.sql.codegen.factoryMode"
    delta_log = jvm.org.apache.spark.sql.delta.DeltaLog
    delta_log.clearCache()  # the run's own snapshot may be computed already
    before = spark.conf.get(key)
    spark.conf.set(key, "FALLBACK")
    try:
        warm_state(spark, spec.sink_path(lake))
        assert spark.conf.get(key) == "FALLBACK"
        assert jvm.org.apache.spark.sql.SparkSession.getActiveSession().get().equals(spark._jsparkSession)
    finally:
        spark.conf.set(key, before)
    snapshot = delta_log.forTable(spark._jsparkSession, spec.sink_path(lake)).unsafeVolatileSnapshot()
    assert snapshot._computedStateTriggered() is True


def test_reingest_needs_a_stateless_transform():
    from sluice.spec import SpecError

    with pytest.raises(SpecError, match="source.on_overwrite: reingest feeds a rewritten file's records to the table "
                                        "again, outside the query's state"):
        spec_of("reingest", transform={"sql": "SELECT v, count(*) AS n FROM source GROUP BY v"},
                sink={"path": "gold/items", "mode": "complete"})


def test_a_file_fixed_after_its_batch_failed_is_read_again_not_reingested(spark, lake):
    # docs/data-quality.md's advice for a failing expectation: fix the data and run again. The failed batch was planned
    # (its files are in the source log) but not written: the rerun reads the fixed file as its batch, once.
    spec = spec_of("reingest", expectations=[{"name": "positive", "rule": "id > 0", "on_violation": "fail"}])
    land(lake, "a.json", [(1, "a")])
    run(spark, spec, lake)
    land(lake, "b.json", [(-1, "x")])
    with pytest.raises(RunFailed, match="expectation positive"):
        run(spark, spec, lake)

    land(lake, "b.json", [(2, "y")], later_by_s=5)
    fixed = run(spark, spec, lake)
    assert (fixed["input_rows"], fixed["overwritten_files"]["count"]) == (1, 0)
    assert "reingest" not in fixed
    assert rows(spark, spec, lake) == [(1, "a"), (2, "y")]


def test_a_copy_left_after_its_batch_was_committed_is_cleaned_up_not_ingested_again(spark, lake):
    spec = spec_of("reingest")
    landed = land(lake, "f.json", [(1, "a")])
    run(spark, spec, lake)
    land(lake, "f.json", [(1, "a2")], later_by_s=5)
    run(spark, spec, lake)
    # a run that died after the companion's commit, before it deleted the copy, would leave it where it was
    checkpoint = spec.checkpoint_path(lake)
    (entry,) = source_log(companion_checkpoint(checkpoint))
    copy = Path(local_file(entry["path"]))
    shutil.copyfile(landed, copy)
    assert copy.name.startswith("f.sluice-v") and copy.parent == Path(staging_folder(checkpoint))

    after = run(spark, spec, lake)
    assert (after["input_rows"], after["overwritten_files"]["count"]) == (0, 0)
    assert not copy.exists()
    assert rows(spark, spec, lake) == [(1, "a"), (1, "a2")]
