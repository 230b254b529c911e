"""What a run needs to know about its Delta sink: its version, and which versions a query wrote."""

from __future__ import annotations

import json
from typing import Any

from delta.tables import DeltaTable
from pyspark.sql import SparkSession


def current_version(spark: SparkSession, path: str) -> int | None:
    """The table's latest version, or None if there is no Delta table at ``path`` yet."""
    if not DeltaTable.isDeltaTable(spark, path):
        return None
    return DeltaTable.forPath(spark, path).history(1).select("version").first()[0]


def commits_since(
    spark: SparkSession, path: str, version: int | None, query_id: str, latest: int | None = None
) -> dict[int, dict[str, Any]]:
    """Streaming commits made by ``query_id`` after ``version`` (all, if None), by batch (epoch) id.

    Each value holds the Delta ``version`` and the commit's ``output_rows``. With ``latest`` (the table's
    current version) only the commits after ``version`` are read, not the whole history: the cost stays
    that of this run's commits however long the table's history grows.
    """
    if not DeltaTable.isDeltaTable(spark, path):
        return {}
    table = DeltaTable.forPath(spark, path)
    if version is not None and latest is not None:
        if latest <= version:
            return {}
        history = table.history(latest - version)
    else:
        history = table.history()
    if version is not None:
        history = history.where(f"version > {int(version)}")
    found: dict[int, dict[str, Any]] = {}
    for row in history.select("version", "operation", "operationParameters", "operationMetrics").collect():
        params = row["operationParameters"] or {}
        if row["operation"] != "STREAMING UPDATE" or params.get("queryId") != query_id:
            continue
        metrics = row["operationMetrics"] or {}
        found[int(params["epochId"])] = {
            "version": int(row["version"]),
            "output_rows": int(metrics.get("numOutputRows", 0)),
        }
    return found


def as_json(value: Any) -> Any:
    """Progress offsets arrive as JSON text or objects; give them back as objects."""
    if isinstance(value, str):
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            return value
    return value
