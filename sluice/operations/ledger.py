"""The run ledger: one row per run (real or dry, CLI or Airflow) in a Delta table.

"Which run wrote version 42 of orders, from which offsets?" is one query::

    SELECT l.run_id, l.dag_run_id, b.batch_id, b.sources
    FROM delta.`<lake root>/_sluice/ledger` l LATERAL VIEW explode(l.micro_batches) AS b
    WHERE l.pipeline = 'orders' AND b.delta_version = 42

The row is appended by delta-rs (the ``deltalake`` package) from Python, not by a Spark job: a blind
append of one small row, committed in a few milliseconds instead of the seconds a cold Spark write costs
every run. Any Delta reader (Spark above, ``sluice status``) reads the table. Blind appends never
conflict, so runs of several pipelines can finish at once; every ``COMPACT_EVERY`` versions the appending
run compacts the table's small files (one per run) so reading it stays cheap after thousands of runs.
"""

from __future__ import annotations

import contextlib
import json
import os
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sluice.storage.object_store import delta_rs_location

if TYPE_CHECKING:
    from sluice.contract import Summary

COMPACT_EVERY = 100
"""Compact the ledger's files (one per run) when its version is a multiple of this."""


MAINTENANCE_KEYS = ("files_compacted", "files_written", "files_removed", "bytes_removed", "tables", "checkpoint_size")


def arrow_schema():
    import pyarrow as pa

    source = pa.struct([
        ("description", pa.string()),
        # JSON: files source {"logOffset": n}, Kafka {topic: {partition: offset}}
        ("start_offset", pa.string()),
        ("end_offset", pa.string()),
        ("input_rows", pa.int64()),
        ("files", pa.list_(pa.string())),
    ])
    batch = pa.struct([
        ("batch_id", pa.int64()),
        ("delta_version", pa.int64()),
        ("replay_of_version", pa.int64()),
        ("input_rows", pa.int64()),
        ("output_rows", pa.int64()),
        ("quarantined_rows", pa.int64()),
        ("sources", pa.list_(source)),
    ])
    utc = pa.timestamp("us", tz="UTC")
    return pa.schema([
        ("pipeline", pa.string()),
        ("run_id", pa.string()),
        ("dag_id", pa.string()),
        ("dag_run_id", pa.string()),
        ("try_number", pa.int32()),
        ("mode", pa.string()),
        ("trigger", pa.string()),
        ("dry_run", pa.bool_()),
        ("status", pa.string()),
        ("error", pa.string()),
        ("started_at", utc),
        ("ended_at", utc),
        ("duration_s", pa.float64()),
        ("batch_ids", pa.list_(pa.int64())),
        ("batches", pa.int32()),
        ("input_rows", pa.int64()),
        ("output_rows", pa.int64()),
        ("delta_version_before", pa.int64()),
        ("delta_version_after", pa.int64()),
        ("checkpoint_id", pa.string()),
        # data quality: records that did not parse or fit, where they went, expectation counts (JSON)
        ("bad_records", pa.int64()),
        ("quarantined_rows", pa.int64()),
        ("dropped_rows", pa.int64()),
        ("rescued_rows", pa.int64()),
        ("expectations", pa.string()),
        ("quarantine", pa.string()),
        # a backfill run: the slice it rebuilt ("2026-11-01..2026-11-03"); null for other runs
        ("backfill", pa.string()),
        # a maintenance run (mode maintenance): what OPTIMIZE and VACUUM did, per table (JSON)
        ("maintenance", pa.string()),
        # landing files rewritten after they were ingested (source.on_overwrite): how many, the first few
        ("overwritten_files", pa.int64()),
        ("overwritten_paths", pa.list_(pa.string())),
        # landing files archived or deleted by the run (source.clean_source): how many, the first few
        ("cleaned_files", pa.int64()),
        ("cleaned_paths", pa.list_(pa.string())),
        # a Delta source following its upstream table's changes (spark_jobs.corrections.upstream): rebuild, reset or
        # promotion; the upstream version the slices were rebuilt from; the slices; the whole report (JSON)
        ("upstream_action", pa.string()),
        ("upstream_version", pa.int64()),
        ("rebuilt_slices", pa.list_(pa.string())),
        ("upstream_changes", pa.string()),
        # what waited for the pipeline when the run began and ended (sluice.operations.backlog; JSON)
        ("backlog_before", pa.string()),
        ("backlog_after", pa.string()),
        # a file source without source.schema: the stored version of its schema the run read with
        ("schema_version", pa.int64()),
        ("micro_batches", pa.list_(batch)),
        ("summary", pa.string()),
        # true: the row could not be appended when its run ended (a full disk, a store down) and was appended
        # later, by the next run that appended to this ledger (sluice.operations.ledger_spool)
        ("recorded_late", pa.bool_()),
    ])


def _text(value: Any) -> str | None:
    return None if value is None else (value if isinstance(value, str) else json.dumps(value))


def ledger_row(summary: Summary) -> dict[str, Any]:
    """The ledger's row of a run's (or a maintenance job's) summary."""
    from sluice.contract import RunSummary

    run = summary if isinstance(summary, RunSummary) else RunSummary.model_construct()
    airflow = summary.airflow
    data = summary.to_json()
    follow = run.upstream_changes or {}
    overwritten = run.overwritten_files or {}
    cleaned = run.cleaned_files or {}
    return {
        "pipeline": summary.pipeline,
        "run_id": summary.run_id,
        "dag_id": airflow.dag_id if airflow else None,
        "dag_run_id": airflow.dag_run_id if airflow else None,
        "try_number": airflow.try_number if airflow else None,
        "mode": summary.mode,
        "trigger": run.trigger if run is summary else None,
        "dry_run": summary.dry_run,
        "status": summary.status,
        "error": summary.error,
        "started_at": datetime.fromisoformat(summary.started_at),
        "ended_at": datetime.fromisoformat(summary.ended_at) if summary.ended_at else None,
        "duration_s": summary.duration_s,
        "batch_ids": [b.batch_id for b in run.micro_batches],
        "batches": len(run.micro_batches),
        "input_rows": run.input_rows,
        "output_rows": run.output_rows,
        "delta_version_before": summary.delta_version_before,
        "delta_version_after": summary.delta_version_after,
        "checkpoint_id": run.checkpoint_id,
        "bad_records": run.bad_records,
        "quarantined_rows": run.quarantined_rows,
        "dropped_rows": run.dropped_rows,
        "rescued_rows": run.rescued_rows,
        "expectations": json.dumps(data.get("expectations") or {}),
        "quarantine": run.quarantine if run is summary else None,
        "backfill": (run.backfill or {}).get("slice"),
        "maintenance": json.dumps({k: data.get(k) for k in MAINTENANCE_KEYS}) if summary.mode == "maintenance" else None,
        "overwritten_files": overwritten.get("count"),
        "overwritten_paths": overwritten.get("paths"),
        "cleaned_files": cleaned.get("count"),
        "cleaned_paths": cleaned.get("paths"),
        "upstream_action": follow.get("action"),
        "upstream_version": follow.get("through_version"),
        "rebuilt_slices": [r["slice"] for r in follow.get("rebuilds") or [] if r.get("written")] if follow else None,
        "upstream_changes": json.dumps(follow) if follow else None,
        "backlog_before": _text(run.backlog_before),
        "backlog_after": _text(run.backlog_after),
        "schema_version": run.schema_version,
        "micro_batches": [
            {
                "batch_id": b.batch_id,
                "delta_version": b.delta_version,
                "replay_of_version": b.replay_of_version,
                "input_rows": b.input_rows,
                "output_rows": b.output_rows,
                "quarantined_rows": b.quarantined_rows,
                "sources": [
                    {
                        "description": s.description,
                        "start_offset": _text(s.start_offset),
                        "end_offset": _text(s.end_offset),
                        "input_rows": s.input_rows,
                        "files": s.files,
                    }
                    for s in b.sources
                ],
            }
            for b in run.micro_batches
        ],
        "summary": json.dumps(data),
        "recorded_late": False,
    }


def arrow_rows(rows: list[dict[str, Any]]):
    """Ledger rows (:func:`ledger_row`) as an Arrow table of :func:`arrow_schema`, made by Arrow's JSON reader.

    Not ``pyarrow.Table.from_pylist``: pyarrow converts Python values through a check that imports pandas
    (its pandas shim's ``_have_pandas_internal``, asked of every list), ~0.2 s of each run's ledger row in a
    driver or launcher with no other use for pandas. The same table (tested against ``from_pylist``): keys
    the schema does not have are left out, missing ones are null, times are ISO 8601 text."""
    import io

    import pyarrow.json as arrow_json

    def value(v: Any) -> str:
        if isinstance(v, datetime):
            return v.isoformat()
        raise TypeError(f"a ledger row holds a {type(v).__name__}: {v!r}")

    text = "\n".join(json.dumps(row, default=value) for row in rows).encode()
    return arrow_json.read_json(
        io.BytesIO(text),
        # one block: a row (its summary's text) may be larger than the reader's default block of 1 MB
        read_options=arrow_json.ReadOptions(use_threads=False, block_size=max(len(text) + 1, 1 << 16)),
        parse_options=arrow_json.ParseOptions(explicit_schema=arrow_schema(), unexpected_field_behavior="ignore"))


def append_run(ledger: str, summary: Summary, attempts: int = 5, *, spool: Path | None = None) -> int:
    """Append the run's row (creating the table on first use); returns the ledger version written. With a
    ``spool`` (:mod:`sluice.operations.ledger_spool`), the rows kept there for this ledger go in the same
    commit, marked ``recorded_late``, and leave the spool after it."""
    from deltalake import DeltaTable, write_deltalake
    from deltalake.exceptions import CommitFailedError, DeltaError

    from sluice.operations import ledger_spool

    late = ledger_spool.pending(spool, ledger)
    recorded = _recorded(ledger, [s for _, s in late]) if late else set()
    rows = [ledger_row(summary), *({**ledger_row(s), "recorded_late": True} for _, s in late
                                   if (s.pipeline, s.run_id, s.started_at) not in recorded)]
    table_rows = arrow_rows(rows)
    # on an object store every commit is a conditional put (sluice.storage.object_store): no append is lost
    location, options = delta_rs_location(ledger)
    with native_stderr_held():
        for attempt in range(attempts):
            try:
                # schema_mode merge: a ledger written by an older sluice gains the new columns
                write_deltalake(location, table_rows, mode="append", schema_mode="merge", name="sluice run ledger",
                                description="one row per sluice run: sluice status, docs/operations.md",
                                storage_options=options)
                break
            except (CommitFailedError, DeltaError):
                # two first runs created the table at the same moment: the loser appends to the winner's table
                if attempt == attempts - 1:
                    raise
        ledger_spool.forget([path for path, _ in late])
        ledger_spool.ensure_reserve(spool)
        table = DeltaTable(location, storage_options=options)
        version = table.version()
        if version > 0 and version % COMPACT_EVERY == 0:
            try:
                table.optimize.compact()
            except DeltaError:  # a concurrent compaction won; the next multiple tries again
                pass
    return version


def record_run(ledger: str, summary: Summary, spool: Path | None, describe=str) -> None:
    """Append the run's row and say so in its summary (``ledger``); when that fails (the run's outcome stands),
    ``ledger_error`` says why, and the row waits in the spool for the next append (``ledger_pending``: the
    file), unless even that fails. ``describe``: how an error is said in one line."""
    from sluice.operations import ledger_spool

    try:
        append_run(ledger, summary, spool=spool)
        summary.ledger = ledger
        return
    except Exception as err:  # noqa: BLE001 - any failure of the append: the row is kept, not lost
        summary.ledger_error = f"could not append to the run ledger {ledger}: {describe(err)}"
    if spool is None:
        return
    try:
        kept = ledger_spool.keep(spool, ledger, summary)
    except OSError as err:
        summary.ledger_error += f"; keeping its row in {spool} for a later append failed too: {err}"
        return
    summary.ledger_pending = str(kept)
    summary.ledger_error += (f"; its row is kept in {kept}: the next run that appends to this ledger records it "
                             "(recorded_late)")


def _recorded(ledger: str, summaries: list) -> set[tuple[str, str, str]]:
    """Which of ``summaries`` the ledger has already (a spooled row appended by a run that stopped before
    taking it out of the spool): (pipeline, run_id, started_at)."""
    import pyarrow as pa
    from deltalake import DeltaTable, QueryBuilder

    location, options = delta_rs_location(ledger)
    if not DeltaTable.is_deltatable(location, storage_options=options):
        return set()
    ids = {s.run_id for s in summaries}
    quoted = ", ".join("'" + i.replace("'", "''") + "'" for i in sorted(ids))
    table = DeltaTable(location, storage_options=options)
    found = pa.table(QueryBuilder().register("ledger", table).execute(
        f"SELECT pipeline, run_id, started_at FROM ledger WHERE run_id IN ({quoted})").read_all())
    return {(row["pipeline"], row["run_id"], row["started_at"].isoformat()) for row in found.to_pylist()}


@contextlib.contextmanager
def native_stderr_held():
    """What native code (delta-rs: a Rust panic's message and backtrace) writes to stderr inside the block is
    held back: written out when the block succeeds, dropped when it raises (the exception says what failed, in
    one line). A full disk made delta-rs print five panics for one failed append."""
    import sys
    import threading

    sys.stderr.flush()
    try:
        saved = os.dup(2)
        reader, writer = os.pipe()
    except OSError:  # no descriptors to spare: let it through
        yield
        return
    held: list[bytes] = []
    drain = threading.Thread(target=lambda: held.extend(iter(lambda: os.read(reader, 65536), b"")), daemon=True)
    drain.start()
    os.dup2(writer, 2)
    os.close(writer)
    ok = False
    try:
        yield
        ok = True
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        drain.join(timeout=5)
        os.close(reader)
        if ok and held:
            os.write(2, b"".join(held))


def latest_runs(ledger: str, pipeline: str | list[str], limit: int = 10, *, where: str = "") -> list[dict[str, Any]]:
    """The pipeline's latest runs, newest first (empty if the ledger does not exist yet); ``pipeline``: its
    name, or every name it has had (``PipelineSpec.names``: a renamed pipeline's runs under its earlier
    names too); ``where``: a condition of sluice's own (never user input) that they must also meet.

    Read with delta-rs' own query engine: scanning through a pyarrow dataset of the table aborted the
    process at exit now and then ("terminate called without an active exception")."""
    import re

    from deltalake import DeltaTable, QueryBuilder

    ledger, options = delta_rs_location(ledger)
    if not DeltaTable.is_deltatable(ledger, storage_options=options):
        return []
    names = [pipeline] if isinstance(pipeline, str) else list(pipeline)
    for name in names:
        if not re.fullmatch(r"[a-z][a-z0-9_]*", name):  # the spec's name pattern: safe inside the SQL below
            raise ValueError(f"not a pipeline name: {name!r}")
    table = DeltaTable(ledger, storage_options=options)
    have = {f.name for f in table.schema().fields}
    columns = [f.name for f in arrow_schema() if f.name not in ("summary", "micro_batches") and f.name in have]
    selected = ", ".join(f'"{c}"' for c in columns)
    condition = f"pipeline IN ({', '.join(repr(n) for n in names)})" + (f" AND ({where})" if where else "")
    # timestamps are to the second: runs that started (and ended) within one second are ordered by the table
    # version each left, the later run's being no lower
    order = ", ".join(["started_at DESC", "ended_at DESC"]
                      + (["delta_version_after DESC NULLS LAST"] if "delta_version_after" in have else []))
    sql = f"SELECT {selected} FROM ledger WHERE {condition} ORDER BY {order} LIMIT {int(limit)}"
    import pyarrow as pa

    return pa.table(QueryBuilder().register("ledger", table).execute(sql).read_all()).to_pylist()
