"""The run ledger, appended and read with delta-rs (no JVM): concurrent appends, compaction, status."""

from __future__ import annotations

import json
import threading

from sluice.contract import RunSummary
from sluice.operations import ledger
from sluice.operations.status import status_table


def summary(run_id: str, pipeline: str = "orders", started: str = "2026-11-23T10:00:00+00:00",
            **extra) -> RunSummary:
    return RunSummary.model_validate({
        "pipeline": pipeline, "run_id": run_id, "mode": "incremental", "trigger": "available_now",
        "dry_run": False, "status": "succeeded", "started_at": started, "ended_at": started, "duration_s": 1.5,
        "sink": f"/lake/{pipeline}", "checkpoint": f"/checkpoints/{pipeline}", "quarantine": f"/lake/{pipeline}_q",
        "input_rows": 10, "output_rows": 10, "delta_version_before": 1, "delta_version_after": 2,
        "micro_batches": [{"batch_id": 4, "delta_version": 2, "input_rows": 10, "output_rows": 10,
                           "sources": [{"description": "FileStreamSource", "start_offset": {"logOffset": 3},
                                        "end_offset": {"logOffset": 4}, "input_rows": 10, "files": ["a.json"]}]}],
        **extra,
    })


def test_concurrent_appends_all_land(tmp_path):
    # Given several runs finishing at the same moment, the first of them creating the ledger
    path = str(tmp_path / "ledger")
    errors = []

    def append(n: int) -> None:
        try:
            ledger.append_run(path, summary(f"r{n}", started=f"2026-11-23T10:00:0{n}+00:00"))
        except Exception as err:  # noqa: BLE001
            errors.append(err)

    threads = [threading.Thread(target=append, args=(n,)) for n in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    # Then every row is there, newest first
    assert errors == []
    runs = ledger.latest_runs(path, "orders", limit=10)
    assert [r["run_id"] for r in runs] == [f"r{n}" for n in range(5, -1, -1)]
    assert runs[0]["batch_ids"] == [4]


def test_the_ledger_compacts_its_small_files(tmp_path, monkeypatch):
    from deltalake import DeltaTable

    monkeypatch.setattr(ledger, "COMPACT_EVERY", 4)
    path = str(tmp_path / "ledger")
    for n in range(4):
        ledger.append_run(path, summary(f"r{n}"))
    files_before = len(DeltaTable(path, version=3).file_uris())
    ledger.append_run(path, summary("r4"))  # version 4: compacted (OPTIMIZE) after the append
    table = DeltaTable(path)
    assert files_before == 4
    assert len(table.file_uris()) == 1
    assert table.history(1)[0]["operation"] == "OPTIMIZE"
    assert sorted(r["run_id"] for r in ledger.latest_runs(path, "orders", limit=10)) == [f"r{n}" for n in range(5)]


def test_status_reads_the_pipelines_runs_only(tmp_path):
    path = str(tmp_path / "ledger")
    ledger.append_run(path, summary("mine", error=None))
    ledger.append_run(path, summary("other", pipeline="customers"))
    ledger.append_run(path, summary("failed", started="2026-11-23T11:00:00+00:00", status="failed",
                                    error="refused: the checkpoint belongs to another query",
                                    airflow={"dag_id": "orders", "dag_run_id": "manual__1", "try_number": 2}))
    runs = ledger.latest_runs(path, "orders")
    assert [r["run_id"] for r in runs] == ["failed", "mine"]
    text = status_table(runs).splitlines()
    assert text[2].split()[2:4] == ["manual__1", "(try"]
    assert "refused: the checkpoint belongs to another query" in text[2]
    assert ledger.latest_runs(str(tmp_path / "none"), "orders") == []


def test_the_backlog_a_run_left_is_in_the_ledger_and_in_status(tmp_path):
    path = str(tmp_path / "ledger")
    before = {"source": "files", "files": 5, "bytes": 500, "oldest_at": None, "measured_in_s": 0.01}
    after = {**before, "files": 2, "bytes": 200}
    ledger.append_run(path, summary("r1", backlog_before=before, backlog_after=after))
    ledger.append_run(path, summary("r2", started="2026-11-23T11:00:00+00:00",
                                    backlog_after={"source": "kafka", "offsets": 120, "partitions": {"t/0": 120}}))
    runs = {r["run_id"]: r for r in ledger.latest_runs(path, "orders")}
    assert (json.loads(runs["r1"]["backlog_before"]), json.loads(runs["r1"]["backlog_after"])) == (before, after)
    header, _, newest, older = status_table(ledger.latest_runs(path, "orders")).splitlines()
    at = header.index("backlog after")
    assert (newest[at:].split()[:2], older[at:].split()[:2]) == (["120", "offsets"], ["2", "files"])


def test_data_quality_counts_are_in_the_ledger_and_a_ledger_from_before_gains_their_columns(tmp_path):
    import pyarrow as pa
    from deltalake import write_deltalake

    path = str(tmp_path / "ledger")
    # a ledger written before the data-quality columns existed
    old = pa.schema([f for f in ledger.arrow_schema() if f.name not in (
        "bad_records", "quarantined_rows", "dropped_rows", "rescued_rows", "expectations", "quarantine")])
    row = {k: v for k, v in ledger.ledger_row(summary("old")).items() if k in old.names}
    row["micro_batches"] = []
    write_deltalake(path, pa.Table.from_pylist([row], schema=old), mode="append")

    expectations = {"positive_amount": {"rule": "amount > 0", "on_violation": "quarantine", "violations": 2}}
    ledger.append_run(path, summary("new", started="2026-11-23T11:00:00+00:00", bad_records=3,
                                    quarantined_rows=5, dropped_rows=0, rescued_rows=1, expectations=expectations,
                                    quarantine="/lake/_quarantine/orders"))
    runs = {r["run_id"]: r for r in ledger.latest_runs(path, "orders")}
    assert (runs["new"]["quarantined_rows"], runs["new"]["bad_records"], runs["new"]["rescued_rows"]) == (5, 3, 1)
    assert json.loads(runs["new"]["expectations"]) == expectations
    assert runs["old"]["quarantined_rows"] is None
    assert "quarantined" in status_table([runs["new"]]).splitlines()[0].split()


def test_quality_warnings_name_the_count_and_where_to_look():
    from sluice.contract.quality import quality_warnings

    found = quality_warnings(summary("r1", quarantined_rows=2, dropped_rows=1, rescued_rows=0,
                                     quarantine="/lake/_quarantine/orders",
                                     expectations={"known": {"rule": "customer IS NOT NULL", "on_violation": "warn",
                                                             "violations": 4}}))
    assert found == [
        "orders: 2 record(s) quarantined (bad records or expectations) in /lake/_quarantine/orders; see them "
        "with: SELECT * FROM delta.`/lake/_quarantine/orders` WHERE run_id = 'r1'",
        "orders: 1 record(s) dropped by on_bad_records: drop or an expectation's drop; counted here, not kept anywhere",
        "orders: expectation known (customer IS NOT NULL) violated by 4 row(s), kept (on_violation: warn)",
    ]
    assert quality_warnings(summary("r2")) == []


def test_quality_warnings_name_rewritten_files_and_the_options():
    from sluice.contract.quality import quality_warnings

    paths = [f"/lake/landing/f{n}.json" for n in range(10)]
    warned = quality_warnings(summary("r1", overwritten_files={"count": 12, "paths": paths, "action": "warn"}))
    assert warned == [
        f"orders: 12 landing file(s) rewritten after they were ingested, their new content NOT ingested: "
        f"{', '.join(paths)} and 2 more. Options: source.on_overwrite: reingest (each new version ingested once; a "
        "merge sink with keys replaces the old rows) or fail (stop the pipeline until it is looked at); land "
        "corrections under a new file name"
    ]
    reingested = quality_warnings(summary("r2", overwritten_files={"count": 1, "paths": paths[:1], "action": "reingest"}))
    assert reingested == [
        "orders: 1 landing file(s) rewritten after they were ingested: /lake/landing/f0.json; their new content is "
        "ingested as new input (source.on_overwrite: reingest; an append sink keeps the old rows too)"
    ]
    assert quality_warnings(summary("r3", overwritten_files={"count": 0, "paths": [], "action": "warn"})) == []


def test_quality_warnings_name_the_schema_change_and_the_rescued_values_moved():
    from sluice.contract.quality import quality_warnings

    change = {"table": "/lake/orders", "applied": False, "added_columns": [{"column": "coupon", "type": "STRING"}],
              "widened_columns": [{"column": "qty", "from": "INT", "to": "BIGINT"}]}
    assert quality_warnings(summary("r1", schema_change=change,
                                    promoted_rescued={"coupon": {"rows": 3, "kept_in_rescued": 1}})) == [
        "orders: schema of /lake/orders: added column coupon STRING; widened qty INT -> BIGINT -- not yet: the "
        "stateful query ran no batch, its next batch makes the change",
        "orders: 3 row(s) had coupon in _rescued: moved into the column coupon; 1 value(s) do not fit its type and "
        "stay in _rescued",
    ]


def test_a_downstream_rebuild_says_which_upstream_version_and_slices_it_came_from(tmp_path):
    path = str(tmp_path / "ledger")
    follow = {"upstream": "/lake/bronze", "pipeline": "bronze", "from_version": 4, "through_version": 7,
              "action": "rebuild", "changes": [{"version": 5, "operation": "WRITE", "kind": "slice",
                                                "slice": "2026-11-01..2026-11-02", "column": "day"}],
              "rebuilds": [{"slice": "2026-11-01..2026-11-02", "written": True},
                           {"slice": "2026-11-04..2026-11-04", "written": False}]}
    ledger.append_run(path, summary("r1", upstream_changes=follow))
    ledger.append_run(path, summary("r2"))
    rows = {r["run_id"]: r for r in ledger.latest_runs(path, "orders", limit=10)}
    assert (rows["r1"]["upstream_action"], rows["r1"]["upstream_version"], list(rows["r1"]["rebuilt_slices"])) == (
        "rebuild", 7, ["2026-11-01..2026-11-02"])
    assert json.loads(rows["r1"]["upstream_changes"]) == follow
    assert (rows["r2"]["upstream_action"], rows["r2"]["upstream_version"], rows["r2"]["rebuilt_slices"]) == (None, None, None)


def test_a_row_that_cannot_be_appended_waits_in_the_spool_and_goes_in_with_the_next_append_once(tmp_path):
    from sluice.operations import ledger_spool

    blocker = tmp_path / "lake"
    blocker.write_text("a file where the ledger's folder should be")  # every append to the ledger fails
    path, spool = str(blocker / "ledger"), tmp_path / "spool"
    failed = summary("failed", status="failed", error="boom")
    ledger.record_run(path, failed, spool)
    assert failed.ledger is None and failed.ledger_error.startswith(f"could not append to the run ledger {path}: ")
    assert failed.ledger_error.endswith("the next run that appends to this ledger records it (recorded_late)")
    kept = tmp_path / failed.ledger_pending
    assert kept.parent == ledger_spool.folder_of(spool, path) and kept.is_file()
    also = summary("also", started="2026-11-23T10:05:00+00:00")
    ledger.record_run(path, also, spool)
    assert [s.run_id for _, s in ledger_spool.pending(spool, path)] == ["failed", "also"]  # oldest run first

    blocker.unlink()  # the ledger can be written again: the next append takes both, marked late, in one commit
    # one of them was appended by a run that died before taking it out of the spool: not appended twice
    ledger.append_run(path, also)
    version = ledger.append_run(path, summary("next", started="2026-11-23T11:00:00+00:00"), spool=spool)
    rows = ledger.latest_runs(path, "orders", limit=10)
    assert sorted((r["run_id"], r["recorded_late"]) for r in rows) == [("also", False), ("failed", True),
                                                                       ("next", False)]
    (late,) = [r for r in rows if r["run_id"] == "failed"]
    assert (late["status"], late["error"]) == ("failed", "boom")
    assert version == 1 and ledger_spool.pending(spool, path) == [] and not kept.exists()
    assert (spool / ledger_spool.RESERVE).stat().st_size == ledger_spool.RESERVE_BYTES


def test_a_ledger_of_an_older_sluice_gains_recorded_late_and_its_rows_read_as_before(tmp_path):
    import pyarrow as pa
    from deltalake import write_deltalake

    path = str(tmp_path / "ledger")
    old = pa.Table.from_pylist([ledger.ledger_row(summary("old"))], schema=ledger.arrow_schema()).drop_columns(
        ["recorded_late"])
    write_deltalake(path, old, mode="append")
    ledger.append_run(path, summary("new", started="2026-11-23T11:00:00+00:00"))
    rows = ledger.latest_runs(path, "orders")
    assert [(r["run_id"], r["recorded_late"]) for r in rows] == [("new", False), ("old", None)]


def test_ledger_rows_are_the_table_from_pylist_makes_without_importing_pandas(tmp_path):
    import subprocess
    import sys
    from datetime import datetime, timezone

    import pyarrow as pa

    # Given rows of every kind the ledger holds: nested batches, nulls, times with and without microseconds or
    # zone, text that JSON escapes, a key the schema does not have, and a summary larger than Arrow's 1 MB block
    big = summary("r2", micro_batches=[{"batch_id": n, "delta_version": n, "input_rows": 1, "output_rows": 1,
                                        "sources": [{"description": "FileStreamSource", "files": [f"f{n}-{'x' * 300}"]}]}
                                       for n in range(4000)])
    rows = [ledger.ledger_row(summary("r1", error='bad "quote"\n\u2028é')), ledger.ledger_row(big),
            {**ledger.ledger_row(summary("r3")), "started_at": datetime(2026, 11, 23, 10, 0, 0, 123456, timezone.utc),
             "ended_at": datetime(2026, 11, 23, 10, 0, 1), "not_a_column": 1, "batch_ids": None}]
    assert len(rows[1]["summary"]) > 1 << 20
    # When they are made into the ledger's Arrow table
    made = ledger.arrow_rows(rows)
    # Then it is the table pyarrow's from_pylist makes of them, value for value
    assert made.schema == ledger.arrow_schema()
    assert made.equals(pa.Table.from_pylist(rows, schema=ledger.arrow_schema()))
    assert made.column("error").to_pylist()[0] == 'bad "quote"\n\u2028é'
    # And appending a run's row imports no pandas (a fresh interpreter: this one has it from the test suite)
    code = ("import sys; from tests.sluice.test_ledger import summary; from sluice.operations import ledger; "
            f"ledger.append_run({str(tmp_path / 'ledger')!r}, summary('r1')); "
            "print(sorted(m for m in ('pandas', 'numpy') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "['numpy']"  # pyarrow's own import; pandas not
    assert [r["run_id"] for r in ledger.latest_runs(str(tmp_path / "ledger"), "orders")] == ["r1"]
