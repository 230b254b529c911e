"""Schema drift at the table: evolve the sink table to the run's output, and bring rescued values into the
columns that now hold them.

The comparison itself is :mod:`sluice.schema.change` (pure Python, shared with ``sluice validate``); the
refusal is a guard (:func:`spark_jobs.sinks.guards.check_schema`). Here:

* :func:`allow_widening` sets the table property ``delta.enableTypeWidening`` before the first write of a
  run whose output widens a column: the batch's write (``mergeSchema``, or MERGE with ``autoMerge``) then
  widens the column in the batch's own commit. https://docs.delta.io/latest/delta-type-widening.html
* :func:`promote_rescued`: a column added to ``source.schema`` that earlier records had kept in ``_rescued``
  gets those values. The columns to promote are written into the checkpoint (``sluice_promote_pending``)
  before the run writes anything and removed after the promotion's commit, so a crash in between makes the
  next run promote them; the promotion itself is ONE Delta UPDATE that moves each value (sets the column and
  removes the field from ``_rescued`` in the same row), so running it again finds nothing to move: every
  value ends up once, in the column or, when it does not fit the column's type, still in ``_rescued``. A
  pipeline reading this table skips the promotion's commit and promotes the same columns in its own table
  (:mod:`spark_jobs.corrections.upstream`).
"""

from __future__ import annotations

import json
from typing import Any

from pyspark.sql import Column, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructField, StructType

from sluice.schema.change import SchemaChange, compare, from_json
from sluice.spec import RESCUED_COLUMN, PipelineSpec
from sluice.storage.checkpoint import PROMOTE_PENDING, Checkpoint
from sluice.storage.delta_log import log_state
from sluice.storage.lock import check_held

TYPE_WIDENING = "delta.enableTypeWidening"
PROMOTED = "sluice_promote_rescued"
"""The key of a promotion's commit metadata (its columns): a Delta source downstream skips such a commit."""
USER_METADATA_CONF = "spark.databricks.delta.commitInfo.userMetadata"


def table_schema(spark: SparkSession, path: str) -> tuple[dict[str, Any], dict[str, str]] | None:
    """The table's JSON schema and properties (None: no Delta table there)."""
    local = log_state(path)
    if local is not None:
        return local["schema"], local["properties"]
    from delta.tables import DeltaTable

    if not DeltaTable.isDeltaTable(spark, path):
        return None
    detail = DeltaTable.forPath(spark, path).detail().select("properties").first()
    return spark.read.format("delta").load(path).schema.jsonValue(), dict(detail["properties"] or {})


def plan(spark: SparkSession, spec: PipelineSpec, table: str, output: StructType) -> SchemaChange | None:
    """What writing ``output`` rows does to the table's schema (None: no table yet, it is created with it)."""
    found = table_schema(spark, table)
    if found is None:
        return None
    return compare(from_json(found[0]), from_json(output.jsonValue()),
                   keep_extra_columns=spec.schema_evolution == "add_columns")


def allow_widening(spark: SparkSession, table: str) -> None:
    """Turn on Delta's type widening on a table whose column the run widens (a metadata-only commit; none
    if it is on already)."""
    found = table_schema(spark, table)
    if found is not None and found[1].get(TYPE_WIDENING) == "true":
        return
    check_held()
    spark.sql(f"ALTER TABLE delta.`{table.replace('`', '``')}` SET TBLPROPERTIES ('{TYPE_WIDENING}' = 'true')")


def apply_change(spark: SparkSession, table: str, change: SchemaChange) -> None:
    """Make the change without a batch (a run that found no new data): metadata-only commits, so that the
    table follows the spec now and rescued values can move into the new columns."""
    quoted = table.replace("`", "``")

    def column(path: str) -> str:
        return ".".join(f"`{part}`" for part in path.split("."))

    if change.widened:
        allow_widening(spark, table)
        for name, _old, new in change.widened:
            check_held()
            spark.sql(f"ALTER TABLE delta.`{quoted}` ALTER COLUMN {column(name)} TYPE {new}")
    if change.added:
        columns = ", ".join(f"{column(name)} {kind}" for name, kind in change.added)
        check_held()
        spark.sql(f"ALTER TABLE delta.`{quoted}` ADD COLUMNS ({columns})")


# --- rescued values into new columns -------------------------------------------------------------

def mark_promotion(spark: SparkSession, table: str, checkpoint: str, columns: list[str]) -> list[str]:
    """Before the run writes: remember the added columns whose values earlier rows may hold in ``_rescued``
    (the table has that column: a JSON source's own, or, downstream, the upstream pipeline's). Returns the
    columns it could not write down: none, the checkpoint layer writes the marker on local disk and object
    stores alike (the run would promote such columns all the same, without the marker's crash safety)."""
    found = table_schema(spark, table)
    if found is None or RESCUED_COLUMN not in [f["name"] for f in found[0]["fields"]]:
        return []
    columns = [c for c in columns if "." not in c and c != RESCUED_COLUMN]
    if not columns:
        return columns
    pending = sorted(set(pending_promotion(checkpoint)) | set(columns))
    Checkpoint(checkpoint).write(PROMOTE_PENDING, json.dumps(pending))
    return []


def pending_promotion(checkpoint: str) -> list[str]:
    found = Checkpoint(checkpoint).read_json(PROMOTE_PENDING)
    return list(found) if isinstance(found, list) else []


def promote_pending(spark: SparkSession, table: str, checkpoint: str, run_id: str,
                    unmarked: list[str] | None = None) -> dict[str, Any] | None:
    """Promote the columns the checkpoint marks as pending (and ``unmarked`` ones) that the table has now (a
    stateful query that ran no batch has not added them yet: they stay pending). Returns, per column that had
    any, the rows whose value moved and the rows whose value does not fit its type and stays in ``_rescued``."""
    pending = sorted(set(pending_promotion(checkpoint)) | set(unmarked or []))
    if not pending:
        return None
    marker = Checkpoint(checkpoint)
    schema = StructType.fromJson(table_schema(spark, table)[0])
    types = {f.name: f.dataType for f in schema.fields}
    if RESCUED_COLUMN not in types:  # nothing to promote from
        marker.delete(PROMOTE_PENDING)
        return None
    ready = [c for c in pending if c in types]
    result = promote_rescued(spark, table, {c: types[c] for c in ready}, run_id) if ready else {}
    left = [c for c in pending if c not in types]
    if left:
        marker.write(PROMOTE_PENDING, json.dumps(left))
    else:
        marker.delete(PROMOTE_PENDING)
    return result


def promote_rescued(spark: SparkSession, table: str, columns: dict[str, Any], run_id: str) -> dict[str, Any]:
    """Move each ``_rescued`` field named like one of ``columns`` into that column, where the column is null
    and the value fits its type (the same JSON parse a record gets at ingest), in one Delta UPDATE."""
    from delta.tables import DeltaTable

    fields = F.from_json(F.col(RESCUED_COLUMN), "map<string,variant>")
    parsed = F.from_json(F.col(RESCUED_COLUMN), StructType([StructField(c, t) for c, t in columns.items()]))

    def present(name: str) -> Column:
        return fields.getItem(name).isNotNull()

    def fits(name: str) -> Column:
        value = fields.getItem(name)
        return (present(name) & F.col(f"`{name}`").isNull()
                & (F.call_function("is_variant_null", value) | parsed.getField(name).isNotNull()))

    counts = (spark.read.format("delta").load(table).where(F.col(RESCUED_COLUMN).isNotNull())
              .agg(*[F.count(F.when(fits(c), 1)).alias(f"{c}__moved") for c in columns],
                   *[F.count(F.when(present(c) & ~fits(c), 1)).alias(f"{c}__kept") for c in columns])
              .first())
    result = {c: {"rows": int(counts[f"{c}__moved"]), "kept_in_rescued": int(counts[f"{c}__kept"])} for c in columns
              if counts[f"{c}__moved"] or counts[f"{c}__kept"]}
    if not any(entry["rows"] for entry in result.values()):
        return result
    moved = F.filter(F.array(*[F.when(fits(c), F.lit(c)) for c in columns]), lambda k: k.isNotNull())
    rest = F.map_filter(fields, lambda k, _v: ~F.array_contains(moved, k))
    assignments = {f"`{c}`": F.when(fits(c), parsed.getField(c)).otherwise(F.col(f"`{c}`")) for c in columns}
    # the rest of _rescued, written as ingest writes it (null when no field is left)
    assignments[RESCUED_COLUMN] = F.when(F.size(rest) > 0, F.to_json(rest))
    condition = F.col(RESCUED_COLUMN).isNotNull() & _any([fits(c) for c in columns])
    before = spark.conf.get(USER_METADATA_CONF, None)
    spark.conf.set(USER_METADATA_CONF, json.dumps({PROMOTED: sorted(columns), "run_id": run_id}))
    try:
        check_held()
        DeltaTable.forPath(spark, table).update(condition, assignments)
    finally:
        spark.conf.unset(USER_METADATA_CONF) if before is None else spark.conf.set(USER_METADATA_CONF, before)
    return result


def _any(flags: list[Column]) -> Column:
    result = F.lit(False)
    for flag in flags:
        result = result | flag
    return result

