"""A pipeline run on real Spark and Delta, in-process (one session for the suite)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from pyspark.testing import assertDataFrameEqual

from devservices.readiness import wait_until
from sluice.contract import run_job
from sluice.contract.request import run_request
from sluice.spec import PipelineSpec
from sluice.storage.delta_log import DeltaLog
from spark_jobs.run.runner import RunFailed, run_pipeline
from spark_jobs.sinks.commit import session_conf
from tests.helpers import (
    delta_version,
    files_under,
    make_spec,
    new_files_since,
    orders_spec,
    own_temp_dir,
    tree_digest,
    write_lines,
    write_orders,
)


def run(spark, spec: PipelineSpec, lake, trigger=None, dry_run=False) -> dict:
    # the ledger has tests of its own (test_exactly_once.py); skipping its append here saves seconds a run
    return run_pipeline(spark, spec, lake, run_job(trigger=trigger or spec.trigger, dry_run=dry_run, run_id="t",
                                                      write_ledger=False)).to_json()


def stderr_until(capsys, text: str) -> str:
    """What was printed on stderr, read until ``text`` is in it: listener events arrive asynchronously."""
    printed = ""

    def seen() -> bool:
        nonlocal printed
        printed += capsys.readouterr().err
        return text in printed

    wait_until(f"the line {text!r}", seen, 60, every=0.2, error=AssertionError)
    return printed


def table(spark, spec, lake):
    return spark.read.format("delta").load(spec.sink_path(lake))


def ids(spark, spec, lake) -> list[int]:
    return sorted(r.id for r in table(spark, spec, lake).select("id").collect())


@pytest.mark.parametrize("trigger", ["available_now", "once"])
def test_runs_ingest_exactly_the_new_files(spark, lake, trigger):
    spec = make_spec(orders_spec(trigger=trigger, transform={"sql": "SELECT *, to_date(ts) AS day FROM source"},
                                 sink={"path": "bronze/orders", "partition_by": ["day"]}))
    landing = lake.lake_root / "landing" / "orders"
    write_orders(landing, "a.json", range(0, 30))
    write_orders(landing, "b.json", range(30, 50))

    first = run(spark, spec, lake)
    assert (first["batches"], first["input_rows"], first["output_rows"]) == (1, 50, 50)
    # version 0 is batch 0, which creates the table with the pipeline's identity
    assert (first["delta_version_before"], first["delta_version_after"]) == (None, 0)
    assert first["micro_batches"][0]["delta_version"] == 0
    assert sorted(Path(f).name for f in first["micro_batches"][0]["sources"][0]["files"]) == ["a.json", "b.json"]

    second = run(spark, spec, lake)
    assert (second["batches"], second["input_rows"], second["output_rows"]) == (0, 0, 0)
    assert second["delta_version_before"] == second["delta_version_after"] == 0  # no new Delta version
    assert delta_version(spec.sink_path(lake)) == 0  # as delta-rs reads the table

    write_orders(landing, "c.json", range(50, 57))
    third = run(spark, spec, lake)
    assert (third["batches"], third["input_rows"], third["output_rows"]) == (1, 7, 7)
    assert third["delta_version_after"] == 1
    assert [Path(f).name for f in third["micro_batches"][0]["sources"][0]["files"]] == ["c.json"]
    assert ids(spark, spec, lake) == list(range(57))
    assert {r.day.isoformat() for r in table(spark, spec, lake).select("day").distinct().collect()} == {
        "2026-11-01", "2026-11-02", "2026-11-03"}


@pytest.mark.parametrize("optimize_write", [None, False])
def test_a_partitioned_sink_writes_a_batch_as_one_file_per_partition_with_optimized_writes(spark, lake,
                                                                                              optimize_write):
    """Six landing files, each read by a task of its own, each holding rows of the three days: by default (a
    partitioned sink) the batch is one of Delta's optimized writes, one file per day; with ``optimize_write:
    false``, one per task and day, as Spark writes it. The same rows either way, a backfill's too."""
    sink = {"path": "bronze/orders", "partition_by": ["day"],
            **({} if optimize_write is None else {"optimize_write": optimize_write})}
    spec = make_spec(orders_spec(transform={"sql": "SELECT id, ts, customer, amount, to_date(ts) AS day FROM source"},
                                 sink=sink, backfill={"column": "day", "path": "landing/orders/dt={{ ds }}"}))
    for n in range(6):  # the folder of one delivery day, whose files hold orders of three days
        write_orders(lake.lake_root / "landing" / "orders" / "dt=2026-11-02", f"part-{n}.json", range(n * 6, n * 6 + 6))
    # a task per file: each file and its open cost (4 MB) fill a partition of 4 MB
    with session_conf(spark, {"spark.sql.files.maxPartitionBytes": str(4 * 1024 * 1024)}):
        assert run(spark, spec, lake)["output_rows"] == 36
        added = {day: len(list((Path(spec.sink_path(lake)) / f"day={day}").glob("*.parquet")))
                 for day in ("2026-11-01", "2026-11-02", "2026-11-03")}
        assert added == dict.fromkeys(added, 1 if optimize_write is None else 6)
        slice_ = run_request(spec, mode="backfill", backfill_from="2026-11-02", backfill_to="2026-11-02").backfill
        rebuilt = run_pipeline(spark, spec, lake, run_job(run_id="b", write_ledger=False, backfill=slice_)).to_json()
    assert rebuilt["status"] == "succeeded", rebuilt["error"]
    log = DeltaLog.open(spec.sink_path(lake))
    added = [a["add"]["path"] for a in log.actions(log.versions()[-1]) if "add" in a]
    assert len(added) == (1 if optimize_write is None else 6) and all("day=2026-11-02" in p for p in added)
    assert ids(spark, spec, lake) == list(range(36))


def test_max_files_per_trigger_runs_several_batches_in_one_run(spark, lake):
    spec = make_spec(orders_spec(source={**orders_spec()["source"], "max_files_per_trigger": 2}))
    landing = lake.lake_root / "landing" / "orders"
    for n in range(5):
        write_orders(landing, f"f{n}.json", range(n * 10, n * 10 + 10))
    summary = run(spark, spec, lake)
    assert summary["batches"] == 3
    assert [b["input_rows"] for b in summary["micro_batches"]] == [20, 20, 10]
    assert [b["delta_version"] for b in summary["micro_batches"]] == [0, 1, 2]  # batch 0 creates the table
    assert ids(spark, spec, lake) == list(range(50))


def test_a_run_that_finds_nothing_after_a_batch_of_many_files_runs_no_spark_job(spark, lake):
    # A restarted query builds its last batch's DataFrame again; over more than 32 files Spark listed them
    # with a Spark job as large as that batch. Local files are listed on the driver instead.
    spec = make_spec(orders_spec())
    landing = lake.lake_root / "landing" / "orders"
    for n in range(40):
        write_orders(landing, f"f{n:02d}.json", range(n * 2, n * 2 + 2))
    assert run(spark, spec, lake)["input_rows"] == 80
    jobs_before = spark_jobs(spark)

    nothing = run(spark, spec, lake)

    assert (nothing["batches"], nothing["input_rows"]) == (0, 0)
    assert spark_jobs(spark) - jobs_before == set()


def spark_jobs(spark) -> set[int]:
    """The ids of the Spark jobs the session has run (those of streaming queries too: they run in job groups
    the status tracker's Python API does not list)."""
    jobs = spark.sparkContext._jsc.sc().statusStore().jobsList(None)
    return {jobs.apply(i).jobId() for i in range(jobs.size())}


def test_batch_replayed_after_crash_between_delta_and_checkpoint_commit_is_skipped(spark, lake):
    # Given two committed runs
    spec = make_spec(orders_spec())
    landing = lake.lake_root / "landing" / "orders"
    write_orders(landing, "a.json", range(0, 10))
    run(spark, spec, lake)
    write_orders(landing, "b.json", range(10, 25))
    run(spark, spec, lake)
    # When the checkpoint loses its last commit, as if the driver died after Delta committed batch 1
    # but before the checkpoint's commits/1 was written
    checkpoint = Path(spec.checkpoint_path(lake))
    (checkpoint / "commits" / "1").unlink()
    (checkpoint / "commits" / ".1.crc").unlink(missing_ok=True)
    replay = run(spark, spec, lake)
    # Then Spark re-runs batch 1 from its offsets log, and Delta's sink skips it: same version, no duplicates
    assert replay["batches"] == 1
    assert replay["micro_batches"][0]["batch_id"] == 1
    assert replay["micro_batches"][0]["delta_version"] is None
    assert replay["micro_batches"][0]["replay_of_version"] == 1  # Delta has (query id, batch 1) already
    assert replay["skipped_batches"] == [1]
    assert replay["input_rows"] == 0  # the sink skipped the batch without even reading its files
    assert replay["output_rows"] == 0
    assert replay["delta_version_before"] == replay["delta_version_after"] == 1
    assert delta_version(spec.sink_path(lake)) == 1
    assert ids(spark, spec, lake) == list(range(25))
    assert (checkpoint / "commits" / "1").is_file()  # the checkpoint caught up


def test_dry_run_leaves_checkpoint_and_table_untouched_and_predicts_the_next_run(spark, lake, monkeypatch,
                                                                                  tmp_path):
    spec = make_spec(orders_spec())
    landing = lake.lake_root / "landing" / "orders"
    write_orders(landing, "a.json", range(0, 10))
    run(spark, spec, lake)
    write_orders(landing, "b.json", range(10, 22))
    write_orders(landing, "c.json", range(22, 25))
    checkpoint = Path(spec.checkpoint_path(lake))
    before = tree_digest(checkpoint)
    roots = [lake.lake_root, lake.checkpoint_root, own_temp_dir(monkeypatch, tmp_path)]
    files_before = files_under(roots)

    dry = run(spark, spec, lake, dry_run=True)

    assert dry["dry_run"] is True
    assert (dry["batches"], dry["input_rows"], dry["output_rows"]) == (1, 15, 15)
    assert sorted(Path(f).name for f in dry["micro_batches"][0]["sources"][0]["files"]) == ["b.json", "c.json"]
    assert tree_digest(checkpoint) == before  # byte-identical
    assert dry["delta_version_before"] == dry["delta_version_after"] == 0
    assert delta_version(spec.sink_path(lake)) == 0
    assert ids(spark, spec, lake) == list(range(10))
    # nothing left anywhere: the checkpoint copy and scratch table are gone, and nothing else was written
    assert new_files_since(roots, files_before) == []

    # the backlog (sluice backlog, the summary's backlog_before) is what the dry run predicts: b and c
    b_and_c = (landing / "b.json").stat().st_size + (landing / "c.json").stat().st_size
    assert {k: dry["backlog_before"][k] for k in ("source", "files", "bytes")} == {
        "source": "files", "files": len(dry["micro_batches"][0]["sources"][0]["files"]), "bytes": b_and_c}
    assert "backlog_after" not in dry  # a dry run leaves the backlog as it found it

    real = run(spark, spec, lake)
    assert real["input_rows"] == dry["input_rows"]
    assert ids(spark, spec, lake) == list(range(25))
    assert (real["backlog_before"]["files"], real["backlog_after"]["files"]) == (2, 0)


def test_dry_run_of_a_pipeline_that_never_ran_creates_nothing(spark, lake, monkeypatch, tmp_path):
    spec = make_spec(orders_spec())
    write_orders(lake.lake_root / "landing" / "orders", "a.json", range(4))
    roots = [lake.lake_root, lake.checkpoint_root, own_temp_dir(monkeypatch, tmp_path)]
    files_before = files_under(roots)
    dry = run(spark, spec, lake, dry_run=True)
    assert dry["input_rows"] == 4
    assert dry["delta_version_after"] is None
    assert delta_version(spec.sink_path(lake)) is None
    assert not Path(spec.checkpoint_path(lake)).exists()
    assert not Path(spec.sink_path(lake)).exists()
    assert new_files_since(roots, files_before) == []


def test_csv_with_header_and_options(spark, lake):
    spec = make_spec({
        "name": "customers",
        "source": {"format": "csv", "path": "landing/customers", "options": {"header": True},
                   "schema": "customer STRING, name STRING, signed_up DATE"},
    })
    write_lines(lake.lake_root / "landing" / "customers" / "c1.csv",
                ["customer,name,signed_up", "c1,Ada,2026-10-01", 'c2,"Lovelace, Ada",2026-10-02'])
    summary = run(spark, spec, lake)
    assert summary["input_rows"] == 2
    expected = spark.createDataFrame(
        [("c1", "Ada", "2026-10-01"), ("c2", "Lovelace, Ada", "2026-10-02")], "customer STRING, name STRING, d STRING"
    ).selectExpr("customer", "name", "to_date(d) AS signed_up")
    assertDataFrameEqual(table(spark, spec, lake), expected)


def test_word_count_in_complete_mode_rewrites_the_table_with_current_counts(spark, lake):
    # The seed guide's first example, as a pipeline
    spec = make_spec({
        "name": "words",
        "source": {"format": "text", "path": "landing/words"},
        "transform": {"sql": "SELECT word, count(*) AS count FROM "
                             "(SELECT explode(split(value, ' ')) AS word FROM source) GROUP BY word"},
        "sink": {"mode": "complete"},
    })
    landing = lake.lake_root / "landing" / "words"
    write_lines(landing / "1.txt", ["apache spark", "apache hadoop"])
    run(spark, spec, lake)
    assertDataFrameEqual(
        table(spark, spec, lake),
        spark.createDataFrame([("apache", 2), ("spark", 1), ("hadoop", 1)], "word STRING, count BIGINT"),
    )
    write_lines(landing / "2.txt", ["apache spark", "spark streaming"])
    second = run(spark, spec, lake)
    assert second["input_rows"] == 2
    assertDataFrameEqual(
        table(spark, spec, lake),
        spark.createDataFrame([("apache", 3), ("spark", 3), ("hadoop", 1), ("streaming", 1)],
                              "word STRING, count BIGINT"),
    )


WINDOWED = {
    "name": "windowed",
    "source": {"format": "json", "path": "landing/events", "schema": "ts TIMESTAMP, word STRING"},
    "transform": {
        "watermark": {"column": "ts", "delay": "10 minutes"},
        "sql": "SELECT window.start AS start, window.end AS end, word, count(*) AS count FROM source "
               "GROUP BY window(ts, '10 minutes', '5 minutes'), word",
    },
    "sink": {"mode": "append"},
}


def events(folder: Path, name: str, pairs: list[tuple[str, str]]) -> None:
    write_lines(folder / name, [json.dumps({"ts": f"2026-11-01T{t}:00Z", "word": w}) for t, w in pairs])


def windows(spark, spec, lake) -> set[tuple[str, str, str, int]]:
    return {
        (r.start.strftime("%H:%M"), r.end.strftime("%H:%M"), r.word, r["count"])
        for r in table(spark, spec, lake).collect()
    }


FIRST_WINDOWS = {  # windows ending by the 12:16 watermark (max event 12:26 - 10 minutes)
    ("11:55", "12:05", "a", 2), ("12:00", "12:10", "a", 2), ("12:00", "12:10", "b", 1),
    ("12:05", "12:15", "b", 1), ("12:05", "12:15", "a", 1),
}
SECOND_WINDOWS = {  # ending by the 12:30 watermark after 12:40 arrives
    ("12:10", "12:20", "a", 2), ("12:15", "12:25", "a", 1), ("12:20", "12:30", "b", 1),
}


def test_windowed_count_writes_each_window_once_after_the_watermark_passes(spark, lake, capsys):
    spec = make_spec(WINDOWED)
    landing = lake.lake_root / "landing" / "events"
    events(landing, "1.json", [("12:01", "a"), ("12:03", "a"), ("12:07", "b"), ("12:12", "a"), ("12:26", "b")])
    first = run(spark, spec, lake)
    # AvailableNow runs the data batch, then a no-data batch that applies the new watermark
    assert first["batches"] == 2
    assert first["micro_batches"][-1]["input_rows"] == 0
    assert windows(spark, spec, lake) == FIRST_WINDOWS

    # each batch's progress is printed as it happens (the task log): rows, rate, phases, watermark, state
    printed = stderr_until(capsys, "windowed batch 1:")
    batch0 = re.search(r"\[sluice\] windowed batch 0: 5 rows in, \d+ rows/s, \d+ ms \((.*)\), watermark (\S+), "
                       r"state rows (\d+)", printed)
    assert batch0, printed
    assert [p.split()[0] for p in batch0.group(1).split(", ")] == [
        "latestOffset", "walCommit", "getBatch", "queryPlanning", "addBatch", "commitOffsets"]
    assert batch0.group(2) == "1970-01-01T00:00:00.000Z" and int(batch0.group(3)) > 0
    assert re.search(r"windowed batch 1: 0 rows in, .*watermark 2026-11-01T12:16:00.000Z", printed), printed

    events(landing, "2.json", [("12:18", "a"), ("12:40", "b")])
    run(spark, spec, lake)
    assert windows(spark, spec, lake) == FIRST_WINDOWS | SECOND_WINDOWS  # final counts, each window once
    assert table(spark, spec, lake).count() == len(FIRST_WINDOWS | SECOND_WINDOWS)


def test_trigger_once_does_not_emit_passed_windows_without_new_data(spark, lake):
    # The pitfall `sluice validate` warns about: Trigger.Once runs no no-data batch
    spec = make_spec({**WINDOWED, "trigger": "once"})
    landing = lake.lake_root / "landing" / "events"
    events(landing, "1.json", [("12:01", "a"), ("12:03", "a"), ("12:07", "b"), ("12:12", "a"), ("12:26", "b")])
    assert run(spark, spec, lake)["batches"] == 1
    assert windows(spark, spec, lake) == set()
    assert run(spark, spec, lake)["batches"] == 0  # nothing new: nothing runs, nothing is emitted
    assert windows(spark, spec, lake) == set()
    # Only new data releases them: its batch runs with the 12:16 watermark the commit log kept
    events(landing, "2.json", [("12:18", "a"), ("12:40", "b")])
    assert run(spark, spec, lake)["batches"] == 1
    assert windows(spark, spec, lake) == FIRST_WINDOWS  # and the 12:30 ones wait for the next data


def test_missing_source_folder_is_a_clear_error(spark, lake):
    spec = make_spec(orders_spec())
    with pytest.raises(RunFailed) as caught:
        run(spark, spec, lake)
    assert caught.value.summary.status == "failed"
    assert str(caught.value) == (
        f"source.path: {lake.lake_root}/landing/orders is not a folder. Create it (files land there) or fix "
        f"source.path in the spec; relative paths start at the lake root {lake.lake_root} (env SLUICE_LAKE_ROOT)."
    )


def test_query_failure_is_reported_in_the_summary(spark, lake):
    spec = make_spec(orders_spec(transform={"sql": "SELECT no_such_column FROM source"}))
    write_orders(lake.lake_root / "landing" / "orders", "a.json", range(3))
    with pytest.raises(RunFailed) as caught:
        run(spark, spec, lake)
    assert caught.value.summary.status == "failed"
    assert "no_such_column" in caught.value.summary.error
    assert not Path(spec.sink_path(lake)).exists()


def test_a_late_file_with_an_old_modification_time_is_still_ingested(spark, lake):
    # Spark's file source ignores, after the first batch, files whose mtime is more than maxFileAge (7 days)
    # older than the newest file it has seen: `cp -p` / `rsync -a` of an old export would be silently
    # skipped. sluice's default keeps every file.
    import os
    import time as clock

    spec = make_spec(orders_spec())
    landing = lake.lake_root / "landing" / "orders"
    write_orders(landing, "new.json", range(0, 5))
    run(spark, spec, lake)
    old = write_orders(landing, "old-export.json", range(5, 9))
    thirty_days_ago = clock.time() - 30 * 24 * 3600
    os.utime(old, (thirty_days_ago, thirty_days_ago))

    summary = run(spark, spec, lake)

    assert summary["input_rows"] == 4
    assert ids(spark, spec, lake) == list(range(9))


def test_the_progress_line_counts_a_batch_read_again_for_its_quarantine_rows_once(spark, lake, capsys):
    # a one-pass batch with bad records reads its files a second time for its quarantine rows, and Spark adds
    # both reads to the batch's input rows: the line says what the summary says, each record once
    spec = make_spec(orders_spec(name="twice_read"))
    landing = lake.lake_root / "landing" / "orders"
    write_orders(landing, "a.json", range(0, 5))
    write_lines(landing / "bad.json", ['{"id": 99, "amo', "not json"])
    summary = run(spark, spec, lake)
    assert (summary["input_rows"], summary["quarantined_rows"], summary["micro_batches"][0]["input_rows"]) == (7, 2, 7)
    printed = stderr_until(capsys, "twice_read batch 0:")
    assert re.search(r"\[sluice\] twice_read batch 0: 7 rows in, \d+ rows/s", printed), printed


def test_a_progress_line_divides_rows_and_rate_by_the_batchs_reads():
    from spark_jobs.driver.progress import progress_line

    report = {"name": "p", "batchId": 3, "numInputRows": 206, "processedRowsPerSecond": 412.0,
              "durationMs": {"addBatch": 400, "triggerExecution": 500}}
    assert progress_line(report, 2) == "[sluice] p batch 3: 103 rows in, 206 rows/s, 500 ms (addBatch 400 ms)"
    assert progress_line(report) == "[sluice] p batch 3: 206 rows in, 412 rows/s, 500 ms (addBatch 400 ms)"


def test_a_driver_started_with_its_jits_defaults_holds_nothing_back(spark):
    # the suite's session runs with SLUICE_DRIVER_JIT=full: C2 is on, and there is nothing to release
    from spark_jobs.driver import jit

    assert jit.report(spark, "full") == {"mode": "full", "optimizing_compiler": "on", "released_because": None}
    assert jit.release(spark, "a test") is False
    assert jit.report(spark, "full")["released_because"] is None
