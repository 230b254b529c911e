"""Checks before a run writes: the checkpoint and the table belong together, and the spec still fits them.

The table records who writes it, in its Delta table properties (so the check does not depend on the
checkpoint):

* ``sluice.pipeline``: the pipeline's name;
* ``sluice.checkpointId``: the id of the checkpoint whose progress the table's content reflects (the
  streaming query id Spark keeps in ``<checkpoint>/metadata``, which sluice writes before the first run).

A table its first batch's write created (:func:`prepare_sink`) has them as ``delta.sluice.pipeline`` and
``delta.sluice.checkpointid``: a path write sets only ``delta.*`` properties, and Delta lowercases the
option's key. :func:`recorded_identity` reads either name.

A checkpoint that is missing, or belongs to another query, while the table holds this pipeline's data
would silently re-ingest everything: such a run is refused, with the options. ``reset`` (``sluice run
--reset-checkpoint``) starts a new checkpoint and replaces the table's content from the source.

The checkpoint also keeps ``sluice.json``: what the checkpoint's offsets and state mean (the source, and the
stateful part of the query). A spec change Spark cannot resume from is explained before Spark starts.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from delta.tables import DeltaTable
from pyspark.sql import SparkSession
from pyspark.sql.types import StructField, StructType

from sluice.schema.change import SchemaChange, refusal_message
from sluice.settings import Settings
from sluice.spec import RESCUED_COLUMN, KafkaSource, PipelineSpec, stateful_sql
from sluice.storage.checkpoint import Checkpoint
from sluice.storage.delta_log import (  # noqa: F401 - the identity's names, imported from here by tests and modules
    CHECKPOINT_PROPERTY,
    PIPELINE_PROPERTY,
    WRITTEN_PREFIX,
    DeltaLog,
    foreign_table_refusal,
    log_state,
    recorded_identity,
)
from sluice.storage.lock import check_held
from spark_jobs.driver.context import Run
from spark_jobs.driver.errors import (
    GuardRefused,  # noqa: F401 - raised here, and imported from here
)
from spark_jobs.sinks import schema_evolution
from spark_jobs.sinks.commit import NewTable
from spark_jobs.sinks.delta_table import uncommitted_log
from spark_jobs.sinks.table import has_commit

# --- the checkpoint ------------------------------------------------------------------------------

def query_shape(spec: PipelineSpec, settings: Settings) -> dict[str, Any]:
    """What the checkpoint's offsets and state are about. A change here cannot resume from it."""
    source = spec.source
    if isinstance(source, KafkaSource):
        where = {"format": "kafka", "topics": sorted(source.topics or []), "subscribe_pattern": source.subscribe_pattern}
    else:
        where = {"format": source.format, "path": spec.source_path(settings)}
    transform = spec.transform
    sql = transform.sql if transform else None
    stateful = stateful_sql(sql) or bool(transform and transform.watermark)
    return {
        "source": where,
        "stateful_query": " ".join(sql.split()) if stateful and sql else None,
        "watermark": transform.watermark.model_dump() if transform and transform.watermark else None,
        "output_mode": "update" if spec.sink.mode == "merge" else spec.sink.mode,
    }


_SHAPE_FIELDS = {
    "source": "the source (format, path or topics)",
    "stateful_query": "the stateful query (aggregation, distinct, join or window in transform.sql)",
    "watermark": "transform.watermark",
    "output_mode": "sink.mode",
}


def check_spec_fits(spec: PipelineSpec, settings: Settings, checkpoint: str) -> None:
    """Refuse a spec the checkpoint cannot resume from, naming what changed."""
    cp = Checkpoint(checkpoint)
    recorded = cp.recorded_query() if cp.has_progress() else None
    if recorded is None:
        return
    current = query_shape(spec, settings)
    changed = [
        f"{_SHAPE_FIELDS[k]}: was {json.dumps(recorded.get(k))}, is now {json.dumps(current[k])}"
        for k in _SHAPE_FIELDS
        if k in recorded and recorded.get(k) != current[k]
    ]
    if changed:
        raise GuardRefused(
            f"the spec of {spec.name} changed in a way its checkpoint ({checkpoint}) cannot resume from: "
            + "; ".join(changed)
            + ". The checkpoint's offsets and state belong to the old query (Spark would fail, or re-read or "
            "skip data). Options: revert the change; or run once with --reset-checkpoint (Airflow: trigger "
            "with mode=reset) to start a new checkpoint and rebuild the table from the new source; or give the "
            "pipeline a new name (new table and checkpoint) and keep the old table."
        )


_STATE_SCHEMA_ERRORS = ("STATE_STORE_KEY_SCHEMA_NOT_COMPATIBLE", "STATE_STORE_VALUE_SCHEMA_NOT_COMPATIBLE",
                        "STATE_STORE_INVALID_VALUE_SCHEMA_EVOLUTION", "STATE_STORE_INVALID_CONFIG_AFTER_RESTART")


def explain_state_failure(spec: PipelineSpec, error: str, checkpoint: str) -> str:
    """Spark refuses to resume a stateful query whose state the change of a column's type would change (a
    widened column inside an aggregation, a deduplication or a join key): say what to do. Spark checks it
    before the batch runs, so nothing was written."""
    if not any(code in error for code in _STATE_SCHEMA_ERRORS):
        return error
    return (
        f"{error} -- the state of {spec.name}'s stateful query (aggregation, deduplication or join), kept in its "
        f"checkpoint ({checkpoint}), holds the columns' old types: a column of source.schema changed type (or "
        "was added to the state) and Spark cannot resume from it. Nothing was written. Options: revert the "
        "type change; or run once with --reset-checkpoint (Airflow: trigger with mode=reset) to rebuild the "
        "state and the table from the source with the new types; or give the pipeline a new name (new table "
        "and checkpoint)."
    )


def record_spec(spec: PipelineSpec, settings: Settings, checkpoint: str) -> None:
    Checkpoint(checkpoint).record_query(spec.name, query_shape(spec, settings))


# --- the table -----------------------------------------------------------------------------------

def table_state(spark: SparkSession, path: str) -> dict[str, Any] | None:
    """The table's properties and file count; None if there is no Delta table there."""
    local = log_state(path)
    if local is not None:
        return {"properties": local["properties"], "num_files": local["num_files"], "columns": local["columns"]}
    if uncommitted_log(path) or not DeltaTable.isDeltaTable(spark, path):
        return None
    detail = DeltaTable.forPath(spark, path).detail().select("properties", "numFiles").first()
    return {"properties": dict(detail["properties"] or {}), "num_files": int(detail["numFiles"] or 0),
            "columns": spark.read.format("delta").load(path).columns}


def _nullable(schema: StructType) -> StructType:
    return StructType([StructField(f.name, f.dataType, True, f.metadata) for f in schema.fields])


def create_table(
    spark: SparkSession, path: str, schema: StructType, spec: PipelineSpec, cp_id: str, *, replace: bool = False
) -> None:
    """Create the sink table, empty, with the pipeline's identity. ``replace`` (a reset): empty an existing
    table and give it the new schema and checkpoint id (two commits; a crash between them leaves an empty
    table that the next run adopts). The old content stays in the Delta history (time travel)."""
    if replace:
        writer = spark.createDataFrame([], _nullable(schema)).write.format("delta").mode("overwrite")
        writer = writer.option("overwriteSchema", "true")
        if spec.sink.partition_by:
            writer = writer.partitionBy(*spec.sink.partition_by)
        check_held()
        writer.save(path)
        set_identity(spark, path, spec, cp_id)
        return
    log = DeltaLog.open(path)
    if log is not None and not log.versions():
        # a creation that died before its first commit left a _delta_log of temporary files only, which Delta's
        # createIfNotExists takes for a table it then cannot read: no commit means no table, so start over
        log.delete()
    builder = DeltaTable.createIfNotExists(spark).location(path).addColumns(_nullable(schema))
    if spec.sink.partition_by:
        builder = builder.partitionedBy(*spec.sink.partition_by)
    builder = builder.property(PIPELINE_PROPERTY, spec.name).property(CHECKPOINT_PROPERTY, cp_id)
    check_held()
    builder.execute()


def set_identity(spark: SparkSession, path: str, spec: PipelineSpec, cp_id: str) -> None:
    spark.sql(
        f"ALTER TABLE delta.`{_quote(path)}` SET TBLPROPERTIES "
        f"('{PIPELINE_PROPERTY}' = '{spec.name}', '{CHECKPOINT_PROPERTY}' = '{cp_id}')"
    )


def _quote(path: str) -> str:
    return path.replace("`", "``")


def check_sink(spark: SparkSession, spec: PipelineSpec, *, table: str, checkpoint: str) -> dict[str, Any] | None:
    """Refuse (:class:`GuardRefused`) when checkpoint and table do not belong together; changes nothing.
    Returns the table's state (None: no table yet)."""
    state = table_state(spark, table)
    if state is None:
        return None
    refuse_foreign_table(spec, table, state)
    has_data = state["num_files"] > 0
    owner, recorded = recorded_identity(state["properties"])
    cp = Checkpoint(checkpoint)
    current = cp.query_id()
    if has_data and not cp.has_progress():
        raise GuardRefused(
            f"the checkpoint of {spec.name} ({checkpoint}) is missing or empty, but its table {table} already "
            f"holds data{' written by this pipeline' if owner else ''}: running now would ingest the whole source "
            "again and duplicate it. Options: restore the checkpoint folder from a backup (then run again); or "
            "run once with --reset-checkpoint (Airflow: trigger with mode=reset) to start a new checkpoint and "
            "REPLACE the table's content with the source's (the old versions stay in the Delta history); or point "
            "sink.path at a new table."
        )
    if recorded and current and recorded != current and has_data:
        raise GuardRefused(
            f"the checkpoint of {spec.name} ({checkpoint}) belongs to another query (id {current}) than the one "
            f"that wrote its table {table} (id {recorded}): its offsets do not describe what the table holds, so "
            "the run could skip or duplicate data. Options: put back the checkpoint of query "
            f"{recorded}; or run once with --reset-checkpoint (Airflow: mode=reset) to rebuild the table from "
            "the source; or point sink.path at a new table."
        )
    return state


def refuse_foreign_table(spec: PipelineSpec, table: str, state: dict[str, Any] | None) -> None:
    owner = recorded_identity((state or {}).get("properties", {}))[0]
    if owner and owner not in spec.names:
        raise GuardRefused(foreign_table_refusal(table, owner, spec.name))


def empty_quarantine(spark: SparkSession, path: str) -> None:
    """A reset re-reads the whole source: the bad records it meets again replace those set aside before."""
    if table_state(spark, path) is not None:
        check_held()
        DeltaTable.forPath(spark, path).delete()


def new_table(spec: PipelineSpec, cp_id: str, schema: StructType) -> NewTable:
    """A table for the first batch's write to create, with the pipeline's identity as ``delta.*`` properties."""
    return NewTable({WRITTEN_PREFIX + PIPELINE_PROPERTY: spec.name, WRITTEN_PREFIX + CHECKPOINT_PROPERTY: cp_id},
                    cp_id, _nullable(schema))


def creates_in_first_write(spec: PipelineSpec) -> bool:
    """Whether a new table is created by the first batch's write rather than empty before the query: append
    and complete sinks, whose writes create a missing table. A MERGE (``merge``, ``scd2``) needs a table to
    merge into: created before, as version 0."""
    return spec.sink.mode in ("append", "complete")


@dataclass(frozen=True)
class Prepared:
    """What :func:`prepare_sink` found and did."""

    checkpoint_id: str
    """The checkpoint id the run uses (in the table's identity and the transaction id)."""
    aside: str | None = None
    """A reset: where the old checkpoint went."""
    change: SchemaChange | None = None
    """The change the run makes to the table's schema."""
    new_table: NewTable | None = None
    """No table yet, and the first batch's write creates it (:func:`creates_in_first_write`)."""


def prepare_sink(run: Run, schema: StructType, *, aside_label: str = "replaced") -> Prepared:
    """Check that the run's checkpoint and table belong together and that the output (``schema``) fits the
    table, and create the table if needed (a reset replaces it, and sets the old checkpoint aside, named
    ``aside_label``). A new append or complete sink is not created here: its first batch's write creates it
    in one commit, version 0: the rows, the transaction, and the identity as ``delta.sluice.*`` properties
    (:func:`new_table`, :func:`spark_jobs.sinks.table.write_rows`). That saves the creation before the query and,
    above all, Delta's reconstruction of the empty table's snapshot (Spark jobs on a cold JVM) that the first
    idempotent write made. (Not a CREATE TABLE AS SELECT, which sets any property: it hides the write from
    Spark's ``Observation`` (completed empty), which counts a batch as it is written.) A run that writes no
    batch creates the table empty after its query (:func:`create_if_missing`)."""
    spark, spec, table, checkpoint = run.spark, run.spec, run.real.table, run.real.checkpoint
    reset = run.job.reset
    if reset:
        state = table_state(spark, table)
        refuse_foreign_table(spec, table, state)
        aside = Checkpoint(checkpoint).set_aside(aside_label, keep_one=aside_label == "followed")
        cp_id = Checkpoint(checkpoint).ensure_query_id()
        if state is None and creates_in_first_write(spec):
            return Prepared(cp_id, aside, None, new_table(spec, cp_id, schema))
        create_table(spark, table, schema, spec, cp_id, replace=state is not None)
        return Prepared(cp_id, aside)
    state = check_sink(spark, spec, table=table, checkpoint=checkpoint)
    change = check_schema(spark, spec, table=table, schema=schema) if state is not None else None
    cp_id = Checkpoint(checkpoint).ensure_query_id()
    if state is None and creates_in_first_write(spec):
        return Prepared(cp_id, new_table=new_table(spec, cp_id, schema))
    if state is None:
        create_table(spark, table, schema, spec, cp_id)
    else:
        if recorded_identity(state["properties"]) != (spec.name, cp_id):
            # a table from before sluice recorded identities, or an empty one whose reset did not finish
            set_identity(spark, table, spec, cp_id)
        if RESCUED_COLUMN in schema.fieldNames() and RESCUED_COLUMN not in state["columns"]:
            # a table from before sluice kept the fields a JSON record has beyond the schema
            check_held()
            spark.sql(f"ALTER TABLE delta.`{_quote(table)}` ADD COLUMNS (`{RESCUED_COLUMN}` STRING)")
    return Prepared(cp_id, change=change)


def create_if_missing(spark: SparkSession, spec: PipelineSpec, table: str, planned: NewTable) -> bool:
    """After a query that was to create its table in its first write but wrote none (no new data): create it
    empty, with the pipeline's identity, so that a run leaves its table as before. Returns whether it did."""
    if has_commit(table):
        return False
    create_table(spark, table, planned.schema, spec, planned.checkpoint_id)
    return True


def check_schema(spark: SparkSession, spec: PipelineSpec, *, table: str, schema: StructType) -> SchemaChange | None:
    """Refuse an output the table cannot take (a column removed, renamed, narrowed or changed to another type)
    before anything is written; return what the run will change (added and widened columns; None: no table)."""
    change = schema_evolution.plan(spark, spec, table, schema)
    if change is not None and change.refused:
        raise GuardRefused(refusal_message(spec.name, table, change))
    return change
