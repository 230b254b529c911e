"""The quarantine table's rows: their columns, the example a refusal quotes, and the marker of a batch whose
quarantine rows a crash left unwritten (see :mod:`spark_jobs.batch.writer`, which writes them)."""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from sluice.storage.checkpoint import QUARANTINE_PENDING, Checkpoint

QUARANTINE_COLUMNS = ("pipeline", "run_id", "batch_id", "source", "raw", "error", "expectation", "quarantined_at",
                      "backfill")
_EXAMPLE_CHARS = 300


def quarantine_pending(spark, checkpoint: str | None) -> int | None:
    """The batch a crash left between its sink commit and its quarantine rows, if any."""
    if checkpoint is None:
        return None
    text = (Checkpoint(checkpoint).read(QUARANTINE_PENDING) or "").strip()
    return int(text) if text.isdigit() else None


def row_json(rows: DataFrame) -> Column:
    """The row as a JSON object (the raw text of a row set aside after parsing)."""
    return F.to_json(F.struct(*[rows[c] for c in rows.columns]))


def clip(text: str | None) -> str:
    text = text or ""
    return text if len(text) <= _EXAMPLE_CHARS else text[:_EXAMPLE_CHARS] + "..."
