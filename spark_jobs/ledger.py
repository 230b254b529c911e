"""The run ledger: one row per run (real or dry, CLI or Airflow) in a Delta table.

"Which run wrote version 42 of orders, from which offsets?" is one query::

    SELECT l.run_id, l.dag_run_id, b.batch_id, b.sources
    FROM delta.`<lake root>/_sluice/ledger` l LATERAL VIEW explode(l.micro_batches) AS b
    WHERE l.pipeline = 'orders' AND b.delta_version = 42

Rows are appended with blind appends, which never conflict: runs of several pipelines can finish at once.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql.types import (
    ArrayType,
    BooleanType,
    DoubleType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

SOURCE = StructType([
    StructField("description", StringType()),
    StructField("start_offset", StringType()),  # JSON: files source {"logOffset": n}, Kafka {topic: {partition: offset}}
    StructField("end_offset", StringType()),
    StructField("input_rows", LongType()),
    StructField("files", ArrayType(StringType())),
])

BATCH = StructType([
    StructField("batch_id", LongType()),
    StructField("delta_version", LongType()),
    StructField("replay_of_version", LongType()),
    StructField("input_rows", LongType()),
    StructField("output_rows", LongType()),
    StructField("sources", ArrayType(SOURCE)),
])

LEDGER_SCHEMA = StructType([
    StructField("pipeline", StringType()),
    StructField("run_id", StringType()),
    StructField("dag_id", StringType()),
    StructField("dag_run_id", StringType()),
    StructField("try_number", IntegerType()),
    StructField("mode", StringType()),
    StructField("trigger", StringType()),
    StructField("dry_run", BooleanType()),
    StructField("status", StringType()),
    StructField("error", StringType()),
    StructField("started_at", TimestampType()),
    StructField("ended_at", TimestampType()),
    StructField("duration_s", DoubleType()),
    StructField("batch_ids", ArrayType(LongType())),
    StructField("batches", IntegerType()),
    StructField("input_rows", LongType()),
    StructField("output_rows", LongType()),
    StructField("delta_version_before", LongType()),
    StructField("delta_version_after", LongType()),
    StructField("checkpoint_id", StringType()),
    StructField("micro_batches", ArrayType(BATCH)),
    StructField("summary", StringType()),
])


def _text(value: Any) -> str | None:
    return None if value is None else (value if isinstance(value, str) else json.dumps(value))


def ledger_row(summary: dict[str, Any]) -> dict[str, Any]:
    airflow = summary.get("airflow") or {}
    batches = summary.get("micro_batches") or []
    started = datetime.fromisoformat(summary["started_at"])
    ended = datetime.fromisoformat(summary["ended_at"]) if summary.get("ended_at") else None
    return {
        "pipeline": summary["pipeline"],
        "run_id": summary["run_id"],
        "dag_id": airflow.get("dag_id"),
        "dag_run_id": airflow.get("dag_run_id"),
        "try_number": airflow.get("try_number"),
        "mode": summary.get("mode"),
        "trigger": summary.get("trigger"),
        "dry_run": bool(summary.get("dry_run")),
        "status": summary.get("status"),
        "error": summary.get("error"),
        "started_at": started,
        "ended_at": ended,
        "duration_s": summary.get("duration_s"),
        "batch_ids": [b["batch_id"] for b in batches],
        "batches": len(batches),
        "input_rows": summary.get("input_rows", 0),
        "output_rows": summary.get("output_rows", 0),
        "delta_version_before": summary.get("delta_version_before"),
        "delta_version_after": summary.get("delta_version_after"),
        "checkpoint_id": summary.get("checkpoint_id"),
        "micro_batches": [
            {
                "batch_id": b["batch_id"],
                "delta_version": b.get("delta_version"),
                "replay_of_version": b.get("replay_of_version"),
                "input_rows": b.get("input_rows", 0),
                "output_rows": b.get("output_rows", 0),
                "sources": [
                    {
                        "description": s.get("description"),
                        "start_offset": _text(s.get("start_offset")),
                        "end_offset": _text(s.get("end_offset")),
                        "input_rows": s.get("input_rows", 0),
                        "files": s.get("files"),
                    }
                    for s in b.get("sources", [])
                ],
            }
            for b in batches
        ],
        "summary": json.dumps(summary, default=str),
    }


def append_run(spark: SparkSession, ledger: str, summary: dict[str, Any]) -> None:
    """Append the run's row. The table is created on first use (auto-compacted: it gets a file per run)."""
    from delta.tables import DeltaTable

    if not DeltaTable.isDeltaTable(spark, ledger):
        try:
            (
                DeltaTable.createIfNotExists(spark).location(ledger).addColumns(LEDGER_SCHEMA)
                .property("delta.autoOptimize.autoCompact", "true")
                .property("sluice.role", "ledger")
                .execute()
            )
        except Exception:  # another run created it at the same moment
            if not DeltaTable.isDeltaTable(spark, ledger):
                raise
    row = spark.createDataFrame([ledger_row(summary)], LEDGER_SCHEMA).coalesce(1)
    row.write.format("delta").mode("append").save(ledger)


def latest_runs(spark: SparkSession, ledger: str, pipeline: str, limit: int = 10) -> list[dict[str, Any]]:
    """The pipeline's latest runs, newest first (empty if the ledger does not exist yet)."""
    from delta.tables import DeltaTable

    if not DeltaTable.isDeltaTable(spark, ledger):
        return []
    df = spark.read.format("delta").load(ledger).where(f"pipeline = '{pipeline}'")
    rows = df.orderBy("started_at", ascending=False).limit(limit).drop("summary", "micro_batches").collect()
    return [r.asDict() for r in rows]
