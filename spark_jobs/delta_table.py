"""What a run needs to know about its Delta sink: its version, and which versions a query wrote."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from delta.tables import DeltaTable
from pyspark.sql import SparkSession


def current_version(spark: SparkSession, path: str) -> int | None:
    """The table's latest version, or None if there is no Delta table at ``path`` yet."""
    local = log_state(path)
    if local is not None:
        return local["version"]
    if not DeltaTable.isDeltaTable(spark, path):
        return None
    return DeltaTable.forPath(spark, path).history(1).select("version").first()[0]


def log_state(path: str) -> dict[str, Any] | None:
    """Version, table properties and file count of a table on local disk, read from its ``_delta_log`` (the
    latest commit's version checksum file) without a Spark job -- on a fresh JVM each Delta query costs
    seconds. None when that is not possible (no table, a remote path, no checksum): ask Delta instead."""
    if "://" in path and not path.startswith("file:"):
        return None
    log = Path(path.removeprefix("file:")) / "_delta_log"
    try:
        versions = [int(p.name[:-5]) for p in log.iterdir() if p.name.endswith(".json") and p.name[:-5].isdigit()]
    except OSError:
        return None
    if not versions:
        return None
    version = max(versions)
    try:
        checksum = json.loads((log / f"{version:020d}.crc").read_text(encoding="utf-8"))
        return {
            "version": version,
            "properties": dict(checksum["metadata"].get("configuration") or {}),
            "num_files": int(checksum["numFiles"]),
        }
    except (OSError, ValueError, KeyError, TypeError):
        return None


def commits_since(
    spark: SparkSession, path: str, version: int | None, query_id: str, latest: int | None = None,
    app_id: str | None = None,
) -> dict[int, dict[str, Any]]:
    """Commits made by the streaming query ``query_id`` after ``version`` (all, if None), by batch (epoch) id:
    its streaming-sink commits, or the MERGE commits its foreachBatch made as transaction ``app_id``.

    Each value holds the Delta ``version`` and the commit's ``output_rows`` (for a MERGE: rows inserted,
    updated and deleted). With ``latest`` (the table's current version) only the commits after ``version``
    are read, not the whole history: the cost stays that of this run's commits however long the history.
    """
    if version is not None and latest is not None and latest <= version:
        return {}
    if not DeltaTable.isDeltaTable(spark, path):
        return {}
    table = DeltaTable.forPath(spark, path)
    if version is not None and latest is not None:
        history = table.history(latest - version)
    else:
        history = table.history()
    if version is not None:
        history = history.where(f"version > {int(version)}")
    found: dict[int, dict[str, Any]] = {}
    columns = ("version", "operation", "operationParameters", "operationMetrics", "userMetadata")
    for row in history.select(*columns).collect():
        params = row["operationParameters"] or {}
        metrics = row["operationMetrics"] or {}
        if row["operation"] == "STREAMING UPDATE" and params.get("queryId") == query_id:
            found[int(params["epochId"])] = {
                "version": int(row["version"]),
                "output_rows": int(metrics.get("numOutputRows", 0)),
            }
        elif app_id and row["operation"] == "MERGE":
            meta = _json_object(row["userMetadata"])
            if meta.get("sluice_app_id") == app_id:
                merge = {
                    "inserted": int(metrics.get("numTargetRowsInserted", 0)),
                    "updated": int(metrics.get("numTargetRowsUpdated", 0)),
                    "deleted": int(metrics.get("numTargetRowsDeleted", 0)),
                }
                found[int(meta["batch_id"])] = {
                    "version": int(row["version"]), "output_rows": sum(merge.values()), "merge": merge,
                }
    return found


def _json_object(text: str | None) -> dict[str, Any]:
    try:
        value = json.loads(text) if text else {}
    except json.JSONDecodeError:
        return {}
    return value if isinstance(value, dict) else {}


def as_json(value: Any) -> Any:
    """Progress offsets arrive as JSON text or objects; give them back as objects."""
    if isinstance(value, str):
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            return value
    return value
