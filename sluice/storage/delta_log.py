"""A Delta table's log, read without Spark: its versions, the latest state (properties, file count, schema)
from the commit's checksum file, each commit's actions and ``commitInfo``. The Spark side uses it to skip a
Spark job (seconds on a cold JVM); ``sluice validate`` to show the schema change a spec would make, without a
JVM; a downstream pipeline to find the upstream commits that changed rows.

Read through :class:`sluice.storage.files.Storage`, the file-system layer the checkpoint is read through: local disk or
an object store (its endpoint and credentials from :mod:`sluice.storage.object_store`).
"""

from __future__ import annotations

import json
from typing import Any

from sluice.storage.files import Entry, Storage

LOG = "_delta_log"


class DeltaLog:
    """The ``_delta_log`` of the table at ``table`` (a path or URI)."""

    def __init__(self, table: str, storage: Storage) -> None:
        self.table, self.files = table, storage

    @classmethod
    def open(cls, table: str) -> DeltaLog | None:
        """The table's log, or None when there is no ``_delta_log`` there."""
        storage = Storage(table)
        return cls(table, storage) if storage.is_dir(LOG) else None

    def __repr__(self) -> str:
        return f"DeltaLog({self.table!r})"

    def versions(self) -> list[int]:
        """The versions of the commit files kept in the log, ascending (none: a creation that died before its
        first commit left only temporary files)."""
        return self.files.numbered(LOG, suffix=".json")

    def actions(self, version: int) -> list[dict[str, Any]]:
        """The actions of one commit (``add``, ``remove``, ``metaData``, ``commitInfo``, ...)."""
        text = self.files.read_text(LOG, f"{version:020d}.json") or ""
        return [json.loads(line) for line in text.splitlines() if line.strip()]

    def state(self) -> dict[str, Any] | None:
        """Version, table properties, file count and schema (Spark's JSON form), from the latest commit's
        version checksum file. None when there is no commit or no checksum: ask Delta instead."""
        try:
            versions = self.versions()
            if not versions:
                return None
            version = versions[-1]
            checksum = json.loads(self.files.read_text(LOG, f"{version:020d}.crc") or "null")
            schema = json.loads(checksum["metadata"]["schemaString"])
            return {
                "version": version,
                "properties": dict(checksum["metadata"].get("configuration") or {}),
                "num_files": int(checksum["numFiles"]),
                "columns": [f["name"] for f in schema["fields"]],
                "schema": schema,
            }
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def history(self, after: int | None = None) -> list[dict[str, Any]]:
        """The ``commitInfo`` of each commit after version ``after`` (all kept commits if None), as
        ``DESCRIBE HISTORY`` shows it, without a Spark job."""
        rows = []
        for version in self.versions():
            if after is not None and version <= after:
                continue
            info = next((a["commitInfo"] for a in self.actions(version) if "commitInfo" in a), None)
            if info is not None:
                rows.append({
                    "version": version,
                    "operation": info.get("operation"),
                    # the log keeps parameter values JSON-encoded ("epochId": "3"); history shows them as text
                    "operationParameters": {k: _text(v) for k, v in (info.get("operationParameters") or {}).items()},
                    "operationMetrics": info.get("operationMetrics") or {},
                    "userMetadata": info.get("userMetadata"),
                })
        return rows

    def referenced(self) -> set[str]:
        """Every file path (relative to the table, decoded) that an ``add``, ``remove`` or ``cdc`` action of
        the kept commits or checkpoints names: the files some version of the table has or had."""
        from urllib.parse import unquote

        named: set[str] = set()
        for version in self.versions():
            for action in self.actions(version):
                for kind in ("add", "remove", "cdc"):
                    if kind in action and action[kind].get("path"):
                        named.add(unquote(action[kind]["path"]))
        for entry in self.files.walk_entries(LOG):
            if entry.name.endswith(".parquet"):  # checkpoints (classic, multi-part, v2 sidecars)
                named.update(unquote(p) for p in self._checkpoint_paths(entry.name))
        return named

    def _checkpoint_paths(self, name: str) -> list[str]:
        import pyarrow.parquet as pq

        with self.files.fs.open_input_file(self.files.path(LOG, name)) as handle:
            checkpoint = pq.ParquetFile(handle)
            kinds = [k for k in ("add", "remove", "cdc") if k in checkpoint.schema_arrow.names]
            # only the paths: a checkpoint's other columns (statistics, partition values) can be most of it
            table = checkpoint.read(columns=[f"{k}.path" for k in kinds]) if kinds else None
        found = []
        for kind in kinds:
            found += [row["path"] for row in table.column(kind).to_pylist() if row and row.get("path")]
        return found

    def delete(self) -> None:
        """Delete the log folder (a creation that died before its first commit: no commit, no table)."""
        self.files.delete_dir(LOG)


def unreferenced_files(table: str, since_ns: int | None = None) -> list[Entry]:
    """The data files (``*.parquet`` outside the log and other ``_``/``.`` folders) under the table's folder that
    no commit of its log names: written by a write whose commit never happened (a run that failed or was
    killed), never part of any version. ``since_ns``: only those modified at or after it. Without a log,
    every data file there. (``name``: the path relative to the table.)"""
    storage = Storage(table)
    if not storage.is_dir():
        return []
    log = DeltaLog(table, storage) if storage.is_dir(LOG) else None
    named = log.referenced() if log is not None else set()
    return [entry for entry in storage.walk_entries()
            if entry.name.endswith(".parquet") and entry.name not in named
            and not any(part.startswith(("_", ".")) for part in entry.name.split("/"))
            and (since_ns is None or entry.mtime_ns >= since_ns)]


def log_state(table: str) -> dict[str, Any] | None:
    """:meth:`DeltaLog.state` of the table at ``table``; None when its log cannot be read that way."""
    log = DeltaLog.open(table)
    return log.state() if log is not None else None


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


PIPELINE_PROPERTY = "sluice.pipeline"
CHECKPOINT_PROPERTY = "sluice.checkpointId"
WRITTEN_PREFIX = "delta."
"""The prefix of the identity's names on a table its first write created (a write option sets only
``delta.*`` table properties)."""


def recorded_identity(properties: dict[str, str]) -> tuple[str | None, str | None]:
    """The pipeline and checkpoint id a table's properties record (None: not recorded): ``sluice.pipeline``
    and ``sluice.checkpointId``, else, on a table its first write created, the same names under ``delta.``.
    Names compared case-insensitively (Delta lowercases a write option's key). The plain names come first:
    set later (a reset's identity), they replace what the first write recorded."""
    lower = {key.lower(): value for key, value in properties.items()}

    def recorded(name: str) -> str | None:
        return lower.get(name.lower()) or lower.get((WRITTEN_PREFIX + name).lower())

    return recorded(PIPELINE_PROPERTY), recorded(CHECKPOINT_PROPERTY)


def foreign_table_refusal(table: str, owner: str, pipeline: str) -> str:
    """Why ``pipeline`` may not write ``table``, which records ``owner`` as its writer: the driver's refusal
    (spark_jobs.sinks.guards), and what ``sluice validate`` predicts."""
    return (f"the sink table {table} belongs to pipeline {owner}, not {pipeline}: two pipelines writing one table "
            f"would mix their data and checkpoints (a reset would wipe {owner}'s data). Give {pipeline} its own "
            f"sink.path; or, if {pipeline} is {owner} renamed, add previous_names: [{owner}] to its spec "
            "(docs/operations.md, \"Renaming a pipeline\").")


def table_owner(table: str) -> str | None:
    """The pipeline a Delta table at ``table`` records as its writer; None: no table there, or none recorded.
    From the latest commit's checksum file (Spark writes one per commit), else from the newest ``metaData``
    action in the commits kept in the log (a writer that writes no checksum)."""
    log = DeltaLog.open(table)
    if log is None:
        return None
    state = log.state()
    if state is not None:
        return recorded_identity(state["properties"])[0]
    for version in reversed(log.versions()):
        meta = next((a["metaData"] for a in log.actions(version) if "metaData" in a), None)
        if meta is not None:
            return recorded_identity(meta.get("configuration") or {})[0]
    return None
