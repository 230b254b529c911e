"""Corrections flow down a chain: a pipeline whose source is an upstream Delta table follows the commits
that CHANGED rows up there (a backfill, a reset, a MERGE), not only the ones that appended.

Delta's streaming source hands over appended rows only; a commit that removed rows stops it
(``DELTA_SOURCE_TABLE_IGNORE_CHANGES``). Each run of a downstream pipeline first reads the upstream table's
log from where its stream stands (:func:`scan_changes`, on the driver, no Spark job) and decides:

* **nothing changed**: the stream runs as always (and stops, loudly, on a change that lands meanwhile);
* **a slice was rebuilt** (a sluice backfill, or a downstream rebuild, whose commit names its slice: column,
  first and last day): the stream runs with ``skipChangeCommits`` -- appends flow down exactly once -- and
  then the same slice of this table is rebuilt from the upstream table's rows of the slice, **at the version
  the stream has consumed through** (read back from the checkpoint), through this pipeline's own transform,
  replacing this table's rows of the slice (Delta replaceWhere). Its commit names the slice too, so the
  pipeline below follows it the same way, all the way down the chain;
* **anything else changed rows** (a MERGE, a DELETE, a reset's REPLACE, a backfill this table has no column
  to slice by, or a ``complete``/``merge`` sink whose rows do not map to a slice): this table is rebuilt
  whole from the upstream one -- the run becomes a reset (new checkpoint, the upstream snapshot read again).

Exactly once: before the stream skips a change, a marker in the checkpoint (``sluice_upstream_pending``)
records the first upstream version the run scans; the marker is cleared only after every rebuild is
committed. A run killed in between finds the marker and rebuilds again; a rebuild already committed is
known by its commit's ``sluice_rebuild`` metadata (the upstream versions it covered) and not done twice.

An aggregation in append mode (a windowed GROUP BY) writes a window once, when the watermark passes it: a
rebuild replaces only the slice's values the stream has already written (e.g. days whose window closed);
the others are kept in the marker and rebuilt by the first run after the stream writes them.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from sluice.contract.request import BackfillSlice
from sluice.spec import DeltaSource, PipelineSpec
from sluice.storage.checkpoint import UPSTREAM_PENDING, Checkpoint
from sluice.storage.delta_log import DeltaLog
from spark_jobs.corrections.slices import (
    SLICE_KEY,
    SliceWrite,
    consumed_through,
    delta_slice,
    slice_predicate,
    write_slice,
)
from spark_jobs.driver.context import Run
from spark_jobs.sinks import checkpoint_files
from spark_jobs.sinks.delta_table import json_object
from spark_jobs.sinks.schema_evolution import PROMOTED

PENDING_FILE = UPSTREAM_PENDING
"""In a commit's userMetadata: the slice a backfill or a rebuild replaced (column, from, to, predicate)."""
REBUILD_KEY = "sluice_rebuild"
"""In a rebuild commit's userMetadata: the upstream table, the version read, the change versions covered."""

_AGGREGATE_RE = re.compile(r"\bgroup\s+by\b|\bdistinct\b", re.IGNORECASE)
_REPLACE_OPERATIONS = ("REPLACE TABLE", "CREATE OR REPLACE TABLE", "REPLACE TABLE AS SELECT",
                       "CREATE OR REPLACE TABLE AS SELECT")


@dataclass(frozen=True)
class Change:
    """One upstream commit that removed rows (Delta's ``remove`` with ``dataChange``)."""

    version: int
    operation: str
    kind: str
    """``slice`` (a backfill or a rebuild: its slice is known), ``promotion`` (rescued values moved into new
    columns: the same rows), ``replace`` (a reset) or ``other`` (MERGE, DELETE, UPDATE, an overwrite)."""
    slice: dict[str, str] | None = None
    promoted: tuple[str, ...] = ()

    def summary(self) -> dict[str, Any]:
        entry: dict[str, Any] = {"version": self.version, "operation": self.operation, "kind": self.kind}
        if self.slice:
            entry["slice"] = slice_label(self.slice)
            entry["column"] = self.slice["column"]
        if self.promoted:
            entry["promoted"] = list(self.promoted)
        return entry


def slice_label(entry: dict[str, str]) -> str:
    return entry.get("label") or f"{entry['from']}/{entry['to']}"


def slice_of(entry: dict[str, str]) -> BackfillSlice:
    return BackfillSlice.from_args(entry["from"], entry["to"])


def _user_metadata(actions: list[dict[str, Any]]) -> tuple[str, dict[str, Any]]:
    info = next((a["commitInfo"] for a in actions if "commitInfo" in a), {})
    return str(info.get("operation") or "?"), json_object(info.get("userMetadata"))


def scan_changes(table: str, start: int, end: int | None = None) -> list[Change] | None:
    """The commits of ``table`` in versions [start, end] that removed rows; None when its log is not read
    without Spark (:meth:`DeltaLog.open`: not followed, Delta's own error stands)."""
    log = DeltaLog.open(table)
    if log is None:
        return None
    changes = []
    for version in log.versions():
        if version < start or (end is not None and version > end):
            continue
        actions = log.actions(version)
        if not any(a["remove"].get("dataChange", True) for a in actions if "remove" in a):
            continue  # an append, OPTIMIZE (dataChange false), a metadata change
        operation, meta = _user_metadata(actions)
        if meta.get(PROMOTED):
            changes.append(Change(version, operation, "promotion", promoted=tuple(meta[PROMOTED])))
        elif isinstance(meta.get(SLICE_KEY), dict):
            changes.append(Change(version, operation, "slice", slice=meta[SLICE_KEY]))
        elif operation in _REPLACE_OPERATIONS:
            changes.append(Change(version, operation, "replace"))
        else:
            changes.append(Change(version, operation, "other"))
    return changes


def applied_changes(table: str, upstream: str, deferred: list[dict[str, Any]]) -> set[int]:
    """The upstream change versions this table's rebuild commits covered (their ``sluice_rebuild``), and those
    of the marker's ``deferred`` entries (rebuilt but for values the stream has not written yet)."""
    done = {int(v) for entry in deferred for v in entry.get("changes") or []}
    log = DeltaLog.open(table)
    if log is None:
        return done
    for commit in log.history():
        rebuild = json_object(commit["userMetadata"]).get(REBUILD_KEY)
        if isinstance(rebuild, dict) and rebuild.get("upstream") == upstream:
            done.update(int(v) for v in rebuild.get("changes") or [])
    return done


# --- where the stream stands --------------------------------------------------------------------------------

def stream_start(checkpoint: str) -> int | None:
    """The first upstream version a restart of the stream reads: the start of its last batch done (Spark
    builds that batch again on restart), or its end when the start is gone. None: no batch done yet."""
    cp = Checkpoint(checkpoint)
    for offset in (cp.restart_offset(), cp.last_offset()):
        if offset and "reservoirVersion" in offset:
            return int(offset["reservoirVersion"])
    return None


def read_pending(checkpoint: str) -> dict[str, Any] | None:
    found = Checkpoint(checkpoint).read_json(PENDING_FILE)
    return found if isinstance(found, dict) else None


# --- the plan -----------------------------------------------------------------------------------------------

@dataclass
class Plan:
    """What this run does about the upstream table's changes since its stream last read it."""

    upstream: str
    pipeline: str | None
    start: int
    changes: list[Change]
    action: str
    """``rebuild`` (slices), ``promotion`` (skip: done again here), ``reset`` (rebuild the whole table), or
    ``none`` (the changes in the stream's range are done already: only skipped)."""
    column: str | None = None
    reason: str | None = None
    deferred: list[dict[str, Any]] = field(default_factory=list)
    """Slice values an aggregation had not written yet when their slice was rebuilt (kept in the marker)."""

    @property
    def promoted(self) -> list[str]:
        return sorted({c for change in self.changes if change.kind == "promotion" for c in change.promoted})

    @property
    def skips_changes(self) -> bool:
        return self.action in ("rebuild", "promotion", "none")

    def summary(self) -> dict[str, Any]:
        entry: dict[str, Any] = {"upstream": self.upstream, "pipeline": self.pipeline, "from_version": self.start,
                                 "changes": [c.summary() for c in self.changes], "action": self.action}
        if self.reason:
            entry["reason"] = self.reason
        return entry


def aggregates(spec: PipelineSpec) -> bool:
    """An aggregation written in append mode: each group (window) once, when the watermark passes it."""
    sql = spec.transform.sql if spec.transform else None
    return bool(sql and _AGGREGATE_RE.search(sql)) and spec.sink.mode == "append"


def plan(spec: PipelineSpec, upstream: str, checkpoint: str, table: str, table_columns: list[str] | None) -> Plan | None:
    """The upstream changes this run must follow, and how; None when there are none (or no upstream log to
    read: Delta's own error stands). ``table_columns``: this table's."""
    source = spec.source
    if not isinstance(source, DeltaSource) or source.skip_change_commits:
        return None
    pending = read_pending(checkpoint) or {}
    starts = [s for s in (stream_start(checkpoint), pending.get("from_version")) if s is not None]
    if not starts:
        return None  # a first run reads the upstream table's latest snapshot: every change is in it
    start = min(starts)
    changes = scan_changes(upstream, start)
    if changes is None:
        return None
    deferred = list(pending.get("deferred") or [])
    applied = applied_changes(table, upstream, deferred) if changes else set()
    seen = bool(changes)
    changes = [c for c in changes if c.version not in applied]
    if not changes and not deferred:
        # changes done already, in the range a restart reads again (Spark builds its last batch anew): skipped
        # (and a marker left by a run killed after its last rebuild's commit: cleared)
        stale = "from_version" in pending
        return Plan(upstream=upstream, pipeline=source.pipeline, start=start, changes=[], action="none") \
            if seen or stale else None
    result = Plan(upstream=upstream, pipeline=source.pipeline, start=start, changes=changes, action="promotion",
                  deferred=deferred)
    slices = [c for c in changes if c.kind == "slice"]
    others = [c for c in changes if c.kind in ("replace", "other")]
    if others:
        first = others[0]
        result.action, result.reason = "reset", (
            f"upstream version {first.version} ({first.operation}) changed rows without naming a slice: this "
            "table is rebuilt whole from the upstream one")
        return result
    if slices or deferred:
        if spec.backfill is not None:
            column = spec.backfill.column
        else:  # the upstream slice's own column, which this table has too (day -> day)
            column = slices[0].slice["column"] if slices else deferred[0]["column"]
        if spec.sink.mode != "append":
            result.action, result.reason = "reset", (
                f"a {spec.sink.mode} sink has no slice of rows to replace: this table is rebuilt whole from the "
                "upstream one")
            return result
        if table_columns is not None and column.lower() not in {n.lower() for n in table_columns}:
            result.action, result.reason = "reset", (
                f"this table has no column {column!r} to replace the upstream slice by: it is rebuilt whole from "
                "the upstream one (set backfill.column to the column holding a row's date to rebuild slices)")
            return result
        result.action, result.column = "rebuild", column
    return result


def write_pending(spark, checkpoint: str, start: int, deferred: list[dict[str, Any]]) -> None:
    """Write down where the scan starts (and the deferred slices) before the stream skips a change; not
    rewritten when it already says the same."""
    if read_pending(checkpoint) == {"from_version": start, "deferred": deferred}:
        return  # left by a run killed before its rebuild: already says so
    checkpoint_files.checkpoint(spark, checkpoint).write(PENDING_FILE, json.dumps({"from_version": start,
                                                                                  "deferred": deferred}))


def clear_pending(spark, checkpoint: str) -> None:
    cp = checkpoint_files.checkpoint(spark, checkpoint)
    if cp.read(PENDING_FILE) is not None:
        cp.delete(PENDING_FILE)


# --- the rebuild ----------------------------------------------------------------------------------------------

def rebuild(run: Run, follow: Plan) -> dict[str, Any]:
    """After the stream: rebuild this table's slices that the upstream changes in [plan start, the version
    the stream consumed through] rebuilt up there, and the values an aggregation had not written before.
    Written to ``run.target`` (a dry run's scratch table and checkpoint); the pipeline's own table's history
    says which changes are done. Returns the summary's ``upstream_changes``."""
    from spark_jobs.batch.transform import register_tables

    spark, spec, run_id = run.spark, run.spec, run.job.run_id
    table, checkpoint = run.target.table, run.target.checkpoint

    report = follow.summary()
    through = consumed_through(checkpoint)
    report["through_version"] = through
    if through is None:
        raise RuntimeError(
            f"the checkpoint {checkpoint} does not say which version of {follow.upstream} its stream has read "
            "through, so the upstream changes cannot be rebuilt at it; the marker "
            f"{PENDING_FILE} stays and the next run rebuilds them")
    done = applied_changes(run.real.table, follow.upstream, follow.deferred)
    changes = [c for c in scan_changes(follow.upstream, follow.start, through) or [] if c.version not in done]
    unfollowed = [c for c in changes if c.kind in ("replace", "other")]
    groups: dict[tuple[str, str, str, str], list[Change]] = {}
    for change in changes:
        if change.kind == "slice":
            entry = change.slice
            groups.setdefault((entry["column"], entry["from"], entry["to"], entry.get("predicate") or ""), []).append(change)
    register_tables(spark, spec.transform, run.settings)
    column = follow.column
    clip = aggregates(spec)
    deferred = [dict(d) for d in follow.deferred]
    rebuilds: list[dict[str, Any]] = []
    plans = []
    for (up_column, start, end, up_predicate), group in groups.items():
        slice_ = slice_of({"from": start, "to": end})
        predicate = slice_predicate(spark, table, column, slice_)
        plans.append((slice_, up_column, up_predicate or None, predicate, [c.version for c in group], None))
    for entry in deferred:
        slice_ = slice_of(entry)
        plans.append((slice_, entry["upstream_column"], entry.get("upstream_predicate"),
                      slice_predicate(spark, table, entry["column"], slice_), entry["changes"], entry))
    pending = list(deferred)  # what the marker says is still to do

    for slice_, up_column, up_predicate, predicate, versions, old in plans:
        df, read = delta_slice(spark, follow.upstream, through, up_predicate or slice_predicate(
            spark, follow.upstream, up_column, slice_, what="the upstream table"))
        target_column = column if old is None else old["column"]
        meta = {REBUILD_KEY: {"upstream": follow.upstream, "pipeline": follow.pipeline, "upstream_version": through,
                              "changes": versions, "run_id": run_id}}
        later: dict[str, Any] = {"from": slice_.start.isoformat(), "to": slice_.end.isoformat(),
                                 "column": target_column, "upstream_column": up_column,
                                 "upstream_predicate": read["predicate"], "changes": versions}

        def remember(values: list[str], later=later, old=old) -> None:
            # before the commit that marks the change done: the marker keeps the values it leaves to later
            if old is not None:
                pending.remove(old)
            if values:
                pending.append({**later, "values": values})
            if old is None and values:
                write_pending(spark, checkpoint, follow.start, pending)

        writer, left = write_slice(run, df, SliceWrite(slice_, target_column, predicate, metadata=meta, clip=clip,
                                                       values=None if old is None else old["values"],
                                                       on_deferred=remember))
        stats = writer.stats.get(0, {})
        entry = {"slice": slice_.label, "column": target_column, "upstream_version": through, "changes": versions,
                 "upstream_predicate": read["predicate"], "predicate": predicate,
                 "input_rows": int(stats.get("input_rows") or 0),
                 "quarantined_rows": int(stats.get("quarantined_rows") or 0), "written": bool(stats)}
        if old is not None:
            entry["deferred_values"] = old["values"]
        if left:
            entry["not_written_yet"] = left
        rebuilds.append(entry)
    report["rebuilds"] = rebuilds
    if pending:
        report["deferred"] = pending
    if unfollowed:
        first = unfollowed[0]
        report["unfollowed"] = [c.summary() for c in unfollowed]
        report["next_run"] = (f"upstream version {first.version} ({first.operation}) changed rows while this run "
                              "read the table: the next run rebuilds this table whole from the upstream one")
        write_pending(spark, checkpoint, follow.start, pending)
    elif pending:
        write_pending(spark, checkpoint, through + 1, pending)
    else:
        clear_pending(spark, checkpoint)
    return report
