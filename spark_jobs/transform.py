"""The transform: a pure function of the input DataFrame (watermark, then the spec's SQL)."""

from __future__ import annotations

from pyspark.sql import DataFrame

from sluice.spec import Transform

SOURCE_VIEW = "source"


def apply_transform(df: DataFrame, transform: Transform | None) -> DataFrame:
    """Apply ``transform`` to ``df``; the SQL reads ``df`` as the temp view ``source``."""
    if transform is None:
        return df
    if transform.watermark is not None:
        df = df.withWatermark(transform.watermark.column, transform.watermark.delay)
    if transform.sql:
        df.createOrReplaceTempView(SOURCE_VIEW)
        df = df.sparkSession.sql(transform.sql)
    return df
