"""``sluice show``: a pipeline's Delta table as a person wants to see it (versions, then rows)."""

from __future__ import annotations

from delta.tables import DeltaTable

from sluice.settings import Settings
from sluice.spec import PipelineSpec
from spark_jobs.driver.session import local_session


def show_table(spec: PipelineSpec, settings: Settings, limit: int = 20) -> None:
    path = spec.sink_path(settings)
    spark = local_session(settings, app_name=f"sluice-show-{spec.name}")
    spark.sparkContext.setLogLevel("ERROR")
    try:
        if not DeltaTable.isDeltaTable(spark, path):
            print(f"{spec.name}: no Delta table at {path} yet (no run has written it)")
            return
        table = spark.read.format("delta").load(path)
        print(f"== {spec.name}: Delta table {path} ({table.count()} rows)")
        history = DeltaTable.forPath(spark, path).history().selectExpr(
            "version", "timestamp", "operation", "operationParameters.mode AS mode",
            "coalesce(get_json_object(userMetadata, '$.batch_id'), operationParameters.epochId) AS batch",
            "coalesce(operationMetrics.numOutputRows, operationMetrics.numTargetRowsInserted) AS rows_written",
        ).orderBy("version")
        history.show(truncate=False)
        order = [c for c in ("id", "ts", "window", "word") if c in table.columns] or table.columns[:1]
        table.orderBy(*order).show(limit, truncate=False)
        quarantine = spec.quarantine_table_path(settings)
        if DeltaTable.isDeltaTable(spark, quarantine):
            bad = spark.read.format("delta").load(quarantine)
            print(f"== {spec.name}: quarantine {quarantine} ({bad.count()} rows: records that did not parse or "
                  "fit the schema, and rows an expectation set aside)")
            bad.orderBy("batch_id", "source").select("batch_id", "source", "raw", "error").show(limit, truncate=60)
    finally:
        spark.stop()
