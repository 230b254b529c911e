"""One micro-batch, from source rows to the sink: bad records, transform, schema drift, expectations, writes.

The streaming query hands each micro-batch to :class:`BatchWriter` (foreachBatch). In order:

1. parquet sources: each new file's schema is checked against the declared one (a clear error naming the
   file and the columns, before Spark reads a value);
2. bad records (:mod:`spark_jobs.quality.records`) are counted and, by ``on_bad_records``, set aside for the
   quarantine table, dropped, or fail the batch;
3. the transform runs on the good rows (a stateless transform runs here, on the batch; a stateful one ran
   in the streaming query);
4. fields beyond the schema (``_rescued``): kept, added as columns, or fail the batch (``schema_evolution``);
5. expectations are counted; ``fail`` fails the batch, ``drop`` leaves rows out, ``quarantine`` moves them;
6. the quarantine rows and the sink rows are written, each as the idempotent Delta transaction
   (pipeline's id, batch id): a batch replayed after a crash writes nothing twice, in either table.

Most batches are written in ONE pass over their input (:meth:`BatchWriter._write_one_pass`): the sink
write itself counts the bad records, rescued fields and expectation violations as it goes (Spark's
observed metrics), and only a batch that had rows to set aside is read a second time, for its quarantine
rows, after the sink commit (nothing is cached: its input is fixed, the same files or offsets). A batch
whose outcome decides whether it may be written at all (anything set to ``fail``), ``add_columns`` (the
new columns' types come from the batch), a MERGE or scd2 sink and a backfill slice are counted first, over the
cached batch (:meth:`BatchWriter._write_counted`): quarantine rows, then sink rows.

While a one-pass batch is between its sink commit and its quarantine rows, a marker in the checkpoint
(``sluice_quarantine_pending``) names it: a restart after a crash there reads the batch again for its
quarantine rows instead of skipping it as done (:func:`spark_jobs.quality.quarantine.quarantine_pending`).

Everything that fails a batch does so before step 6 and raises :class:`BatchRejected`: the checkpoint does
not advance, and the next run, after the fix, processes the same batch again.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from pyspark.sql import Column, DataFrame, Observation
from pyspark.sql import functions as F
from pyspark.sql.types import StringType, StructField, StructType

from sluice.schema.stored import SchemaVersion, next_version
from sluice.spec import RESCUED_COLUMN, FileSource, PipelineSpec
from sluice.storage.checkpoint import QUARANTINE_PENDING, Checkpoint
from sluice.storage.lock import check_held
from spark_jobs.batch.transform import apply_transform
from spark_jobs.driver.errors import BatchRejected
from spark_jobs.quality.expectations import (
    count_violations,
    quarantine_reason,
    violations,
)
from spark_jobs.quality.quarantine import clip, row_json
from spark_jobs.quality.records import BAD, ORIGIN, RAW, good_rows
from spark_jobs.sinks import checkpoint_files
from spark_jobs.sinks.schema_evolution import allow_widening
from spark_jobs.sinks.table import Commit, Target, has_commit, write_rows, write_sink
from spark_jobs.sources.files import check_parquet_files
from spark_jobs.sources.inference import type_ddl


def source_reads(stats: dict[int, dict[str, Any]], batch_id: int) -> int:
    """How many times batch ``batch_id`` read its input, by a writer's ``stats``: a one-pass batch with rows to
    set aside reads its source again for them, and Spark counts its input once per read."""
    return (stats.get(batch_id) or {}).get("source_reads", 1)


class BatchWriter:
    """foreachBatch function of a pipeline's query. ``stats`` holds, by batch id, what each batch found.

    ``transform``: run the spec's (stateless) transform here, on each batch. ``bad_only``: the companion
    query of a stateful pipeline, which only sets the source's bad records aside (its main query cannot
    hand them over: an aggregation's output rows are not input records).
    """

    def __init__(self, spec: PipelineSpec, target: Target, *, transform: bool, bad_only: bool = False,
                 skip_batches: set[int] | None = None):
        self.spec = spec
        self.skip_batches = skip_batches or set()
        """Batches the table already holds (a replay after a crash between the Delta and checkpoint
        commits): not even read."""
        self.target = target
        self.transform = transform
        self.bad_only = bad_only
        self.stats: dict[int, dict[str, Any]] = {}
        self.failure: BaseException | None = None
        """What failed a batch, as raised here: Spark hands the query's caller only a wrapper of it."""
        self._cached: list[DataFrame] = []
        self._spark = None
        self._widening_allowed = False

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        if batch_id in self.skip_batches:
            self.stats[batch_id] = {"replayed": True}
            return
        try:
            self._write(batch, batch_id)
        except Exception as err:
            self.failure = err
            raise

    # --- the steps ------------------------------------------------------------------------------

    def _write(self, batch: DataFrame, batch_id: int) -> None:
        spec = self.spec
        if self.target.widen_types and not self.bad_only and not self._widening_allowed:
            # here, not before the query: a stateful query whose state Spark cannot resume from (a widened
            # column in its aggregation) fails before its first batch, and leaves the table untouched
            allow_widening(batch.sparkSession, self.target.table)
            self._widening_allowed = True
        if isinstance(spec.source, FileSource) and spec.source.format == "parquet":
            files = (self.target.files if self.target.files is not None
                     else Checkpoint(self.target.checkpoint).files_of_batch(batch_id))
            check_parquet_files(batch.sparkSession, spec, files or [])
        if self._one_pass():
            self._write_one_pass(batch, batch_id)
        else:
            self._write_counted(batch, batch_id)

    def _one_pass(self) -> bool:
        """Whether a batch can be written while it is counted (see the module's doc)."""
        spec = self.spec
        return not (
            self.bad_only
            or self.target.replace_where is not None
            or self.target.app_id is None
            or spec.sink.mode in ("merge", "scd2")
            or spec.on_bad_records == "fail"
            or spec.schema_evolution != "rescue"
            or any(e.on_violation == "fail" for e in spec.expectations)
        )

    def _write_one_pass(self, batch: DataFrame, batch_id: int) -> None:
        stats: dict[str, Any] = {"bad_records": 0, "quarantined_rows": 0, "dropped_rows": 0}
        self.stats[batch_id] = stats
        self._spark = batch.sparkSession
        # Not cached: most batches are read once, by the sink write, and caching every batch for the few with
        # rows to set aside cost ~20% of a clean run. A batch with quarantine rows reads its source again for
        # them (the same files or offsets: a micro-batch's input is fixed), once per kind of rows set aside;
        # Spark adds each read to the query's input row count, which the run summary divides back
        # (``source_reads``).
        spec = self.spec
        tag = uuid.uuid4().hex[:12]
        # rows in: also tells whether the write ran at all (Delta skips a transaction it has committed)
        source_seen = Observation(f"sluice_source_{batch_id}_{tag}")
        counts = [F.count(F.lit(1)).alias("rows")]
        # fields this pipeline's parse kept (a Delta source's _rescued column is its upstream's, counted there)
        rescued = RESCUED_COLUMN in batch.columns and BAD in batch.columns
        if BAD in batch.columns:
            counts.append(F.count(F.col(BAD)).alias("bad"))
            if rescued:
                counts.append(F.count(F.when(F.col(BAD).isNull(), F.col(RESCUED_COLUMN))).alias("rescued"))
        rows = good_rows(batch.observe(source_seen, *counts))
        if self.transform:
            rows = apply_transform(rows, spec.transform)
        if "_metadata" in rows.columns:  # the file's metadata struct itself is never a table column
            rows = rows.drop("_metadata")
        checked, expectations_seen, violated, set_aside = rows, None, {}, None
        if spec.expectations:
            expectations_seen = Observation(f"sluice_expectations_{batch_id}_{tag}")
            violated, set_aside, dropped = violations(self.spec.expectations)
            rows = rows.observe(expectations_seen, *[F.count(F.when(violated[e.name], 1)).alias(e.name)
                                                     for e in spec.expectations],
                                F.count(F.when(dropped, 1)).alias("__dropped"),
                                F.count(F.when(set_aside, 1)).alias("__quarantined"))
            rows = rows.where(~set_aside & ~dropped)
        spark, checkpoint = batch.sparkSession, self.target.checkpoint
        marker = checkpoint_files.checkpoint(spark, checkpoint) if checkpoint is not None else None
        if marker is not None:
            marker.write(QUARANTINE_PENDING, str(batch_id))
        write_sink(rows, spec.sink, self.target.table,
                   Commit(batch_id, app_id=self.target.app_id, merge_schema=self.target.evolve_schema,
                          metadata={"sluice_backfill": None, "run_id": self.target.run_id},
                          new_table=self.target.new_table))
        self.target.new_table = None  # the table has a commit now: later batches need not look for one
        if not _observed(source_seen):
            # Delta skipped the write: the table has this batch's transaction (a replay after a crash that the
            # run did not see coming). Its quarantine rows may be missing: count it, and write what is missing.
            self._write_counted(batch, batch_id)
        else:
            seen = source_seen.get
            stats["bad_records"] = bad = seen.get("bad", 0)
            if rescued:
                stats["rescued_rows"] = seen["rescued"]
            quarantine: list[DataFrame] = []
            if bad:
                quarantine += self._bad_records(batch, batch_id, bad)
            if expectations_seen is not None:
                found = expectations_seen.get
                stats["expectations"] = {
                    e.name: {"rule": e.rule, "on_violation": e.on_violation, "violations": found[e.name]}
                    for e in spec.expectations
                }
                stats["dropped_rows"] += found["__dropped"]
                stats["quarantined_rows"] += found["__quarantined"]
                if found["__quarantined"]:
                    quarantine.append(self._expectation_rows(checked, violated, set_aside, batch_id))
            stats["source_reads"] = 1 + len(quarantine)
            self._write_quarantine(quarantine, batch_id)
        if marker is not None:
            marker.delete(QUARANTINE_PENDING)

    def _write_counted(self, batch: DataFrame, batch_id: int) -> None:
        spec = self.spec
        stats: dict[str, Any] = {"bad_records": 0, "quarantined_rows": 0, "dropped_rows": 0}
        self.stats[batch_id] = stats
        batch = batch.persist()
        self._spark = batch.sparkSession
        cached = self._cached = [batch]
        try:
            if self.target.replace_where is not None:
                stats["input_rows"] = batch.count()
            quarantine: list[DataFrame] = []
            rescued = RESCUED_COLUMN in batch.columns
            if BAD in batch.columns:
                counts = batch.agg(
                    F.count(F.col(BAD)).alias("bad"),
                    (F.count(F.when(F.col(BAD).isNull(), F.col(RESCUED_COLUMN))) if rescued else F.lit(0)).alias("rescued"),
                ).first()
                stats["bad_records"] = bad = counts["bad"]
                if rescued:
                    stats["rescued_rows"] = counts["rescued"]
                if bad:
                    quarantine += self._bad_records(batch, batch_id, bad)
            if self.bad_only:
                self._write_quarantine(quarantine, batch_id)
                return
            rows = good_rows(batch)
            if rescued and spec.schema_evolution == "fail" and stats.get("rescued_rows"):
                raise BatchRejected(self._new_fields_message(rows, batch_id, stats["rescued_rows"]))
            if rescued and spec.schema_evolution == "add_columns" and stats.get("rescued_rows"):
                rows, misfits = self._add_columns(rows, batch_id, stats)
                quarantine += misfits
            elif rescued and spec.schema_evolution == "add_columns":
                rows = rows.drop(RESCUED_COLUMN)
            if self.transform:
                rows = apply_transform(rows, spec.transform)
            if "_metadata" in rows.columns:  # the file's metadata struct itself is never a table column
                rows = rows.drop("_metadata")
            if spec.expectations:
                rows = rows.persist()
                cached.append(rows)
                rows, violators = self._expectations(rows, batch_id, stats)
                quarantine += violators
            if self.target.replace_where is not None:
                rows, outside = self._outside_slice(rows, batch_id, stats)
                quarantine += outside
            if spec.sink.mode == "scd2":
                rows, unsequenced = self._unsequenced(rows, batch_id, stats)
                quarantine += unsequenced
            self._write_quarantine(quarantine, batch_id)
            write_sink(rows, spec.sink, self.target.table, Commit(
                batch_id, app_id=self.target.app_id, replace_where=self.target.replace_where,
                metadata={"sluice_backfill": self.target.backfill, "run_id": self.target.run_id,
                          **(self.target.commit_metadata or {})},
                merge_schema=spec.schema_evolution == "add_columns" or self.target.evolve_schema,
                new_table=self.target.new_table))
            self.target.new_table = None
        finally:
            for df in cached:
                df.unpersist()

    def _bad_records(self, batch: DataFrame, batch_id: int, count: int) -> list[DataFrame]:
        action = self.spec.on_bad_records
        if action == "fail":
            example = batch.where(F.col(BAD).isNotNull()).select(RAW, ORIGIN, BAD).first()
            raise BatchRejected(
                f"{count} bad record(s) in batch {batch_id} and on_bad_records: fail, e.g. {clip(example[RAW])!r} "
                f"from {example[ORIGIN]}: {example[BAD]}. Nothing of the batch was written and the checkpoint "
                "did not advance. Fix or remove the records and run again, or set on_bad_records: quarantine "
                "(keep them aside in the quarantine table) or drop."
            )
        if action == "drop":
            self.stats[batch_id]["dropped_rows"] += count
            return []
        self.stats[batch_id]["quarantined_rows"] += count
        return [self._quarantine_rows(batch.where(F.col(BAD).isNotNull()), batch_id, F.col(ORIGIN), F.col(RAW),
                                      F.col(BAD), F.lit(None))]

    def _quarantine_rows(self, df: DataFrame, batch_id: int, source: Column, raw: Column, error: Column,
                         expectation: Column) -> DataFrame:
        return df.select(
            F.lit(self.spec.name).alias("pipeline"),
            F.lit(self.target.run_id).alias("run_id"),
            F.lit(batch_id).cast("bigint").alias("batch_id"),
            source.cast("string").alias("source"),
            raw.cast("string").alias("raw"),
            error.cast("string").alias("error"),
            expectation.cast("string").alias("expectation"),
            F.current_timestamp().alias("quarantined_at"),
            F.lit(self.target.backfill).cast("string").alias("backfill"),
        )

    def _write_quarantine(self, parts: list[DataFrame], batch_id: int) -> None:
        label = self.target.backfill
        if label is not None:
            # a backfill replaces what an earlier backfill of the same slice set aside
            slice_rows = f"backfill = '{label}'"
            if not parts:
                from delta.tables import DeltaTable

                spark = self._spark
                if DeltaTable.isDeltaTable(spark, self.target.quarantine):
                    check_held()
                    DeltaTable.forPath(spark, self.target.quarantine).delete(slice_rows)
                return
            write_rows(_union(parts), self.target.quarantine, Commit(
                batch_id, replace_where=slice_rows, metadata={"sluice_backfill": label, "run_id": self.target.run_id}))
            return
        if not parts:
            return
        # observed: whether Delta wrote the rows now or had this batch's transaction already (a replay)
        written = Observation(f"sluice_quarantine_{batch_id}_{uuid.uuid4().hex[:12]}")
        rows = _union(parts).observe(written, F.count(F.lit(1)).alias("rows"))
        write_rows(rows, self.target.quarantine, Commit(batch_id, app_id=self.target.app_id))
        self.stats[batch_id]["quarantine_committed"] = _observed(written)

    def _outside_slice(self, rows: DataFrame, batch_id: int, stats: dict[str, Any]) -> tuple[DataFrame, list[DataFrame]]:
        """A backfill's rows whose column is not in the slice (a file in the wrong day's folder): bad records,
        handled by ``on_bad_records`` -- replaceWhere would refuse the whole write for one of them."""
        inside = F.coalesce(F.expr(self.target.replace_where), F.lit(False))
        rows = rows.persist()
        self._cached.append(rows)
        count = rows.where(~inside).count()
        stats["outside_slice"] = count
        if not count:
            return rows, []
        error = f"outside the backfill slice {self.target.backfill} ({self.target.replace_where})"
        stats["bad_records"] += count
        if self.spec.on_bad_records == "fail":
            example = rows.where(~inside).select(row_json(rows)).first()[0]
            raise BatchRejected(f"{count} row(s) of the backfill are {error}, e.g. {clip(example)}, and "
                                "on_bad_records: fail. The table was not changed.")
        if self.spec.on_bad_records == "drop":
            stats["dropped_rows"] += count
            return rows.where(inside), []
        stats["quarantined_rows"] += count
        bad = self._quarantine_rows(rows.where(~inside), batch_id, F.lit(None), row_json(rows), F.lit(error),
                                    F.lit(None))
        return rows.where(inside), [bad]

    def _unsequenced(self, rows: DataFrame, batch_id: int, stats: dict[str, Any]) -> tuple[DataFrame, list[DataFrame]]:
        """An scd2 sink's rows without a ``sequence_by`` value: bad records, handled by ``on_bad_records`` (a
        change that cannot be placed in its key's history)."""
        column = self.spec.sink.sequence_by
        missing = F.col(column).isNull()
        rows = rows.persist()
        self._cached.append(rows)
        count = rows.where(missing).count()
        if not count:
            return rows, []
        error = f"no value in {column} (sink.sequence_by): the change cannot be placed in its key's history"
        stats["bad_records"] += count
        if self.spec.on_bad_records == "fail":
            example = rows.where(missing).select(row_json(rows)).first()[0]
            raise BatchRejected(f"{count} row(s) of batch {batch_id} have {error}, e.g. {clip(example)}, and "
                                "on_bad_records: fail. Nothing of the batch was written and the checkpoint did not "
                                f"advance: give every row a {column}, or choose on_bad_records: quarantine or drop.")
        if self.spec.on_bad_records == "drop":
            stats["dropped_rows"] += count
            return rows.where(~missing), []
        stats["quarantined_rows"] += count
        bad = self._quarantine_rows(rows.where(missing), batch_id, F.lit(None), row_json(rows), F.lit(error),
                                    F.lit(None))
        return rows.where(~missing), [bad]

    def _new_fields_message(self, rows: DataFrame, batch_id: int, count: int) -> str:
        example = rows.where(F.col(RESCUED_COLUMN).isNotNull()).select(RESCUED_COLUMN).first()[0]
        names = ", ".join(sorted(json.loads(example)))
        return (
            f"{count} record(s) in batch {batch_id} have fields the schema does not declare (e.g. {names}: "
            f"{clip(example)}) and schema_evolution: fail. Nothing of the batch was written and the checkpoint "
            "did not advance. Add the fields to source.schema, or set schema_evolution: rescue (keep them in "
            f"{RESCUED_COLUMN}) or add_columns (add them to the table), and run again."
        )

    def _add_columns(self, rows: DataFrame, batch_id: int, stats: dict[str, Any]) -> tuple[DataFrame, list[DataFrame]]:
        """Turn the ``_rescued`` fields into columns: a field the table has keeps the table's type, a new one
        gets the type Spark infers from this batch. A value that does not fit is a bad record."""
        spark = rows.sparkSession
        jvm = spark._jvm
        texts = rows.where(F.col(RESCUED_COLUMN).isNotNull()).select(RESCUED_COLUMN)
        inferred = StructType.fromJson(json.loads(
            spark._jsparkSession.read().json(getattr(texts._jdf, "as")(jvm.org.apache.spark.sql.Encoders.STRING()))
            .schema().json()
        ))
        new_table = self.target.new_table
        table_schema = (new_table.schema if new_table is not None and not has_commit(self.target.table)
                        else spark.read.format("delta").load(self.target.table).schema)  # not created yet: as planned
        table_types = {f.name.lower(): f for f in table_schema.fields}
        declared = {c.lower() for c in rows.columns}
        fields = [
            StructField(f.name, table_types[f.name.lower()].dataType if f.name.lower() in table_types else f.dataType)
            for f in inferred.fields if f.name.lower() not in declared and not f.name.startswith("_corrupt")
        ]
        if not fields:
            return rows.drop(RESCUED_COLUMN), []
        corrupt = "__sluice_rescued_corrupt"
        schema = StructType([*fields, StructField(corrupt, StringType())])
        parsed = rows.withColumn("__sluice_new", F.from_json(
            F.col(RESCUED_COLUMN), schema, {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": corrupt}))
        misfit = F.col(f"__sluice_new.{corrupt}").isNotNull()
        stats["added_columns"] = [f.name for f in fields if f.name.lower() not in table_types]
        if self.target.schema_checkpoint is not None:
            self._store_schema_version(spark, fields, batch_id, stats)
        bad = parsed.where(misfit)
        misfits = []
        count = bad.count()
        if count:
            error = F.lit("field(s) beyond the schema that do not fit the table's columns: "
                          + ", ".join(f"{f.name} {f.dataType.simpleString()}" for f in fields))
            quarantined = self._quarantine_rows(bad.drop("__sluice_new"), batch_id, F.lit(None),
                                                row_json(rows), error, F.lit(None))
            stats["bad_records"] += count
            if self.spec.on_bad_records == "fail":
                raise BatchRejected(f"{count} record(s) in batch {batch_id}: {error}; on_bad_records: fail")
            if self.spec.on_bad_records == "drop":
                stats["dropped_rows"] += count
            else:
                stats["quarantined_rows"] += count
                misfits.append(quarantined)
        good = parsed.where(~misfit | F.col("__sluice_new").isNull())
        good = good.select(*[c for c in rows.columns if c != RESCUED_COLUMN],
                           *[F.col(f"__sluice_new.`{f.name}`").alias(f.name) for f in fields])
        return good, misfits

    def _store_schema_version(self, spark, fields: list[StructField], batch_id: int, stats: dict[str, Any]) -> None:
        """The stored schema's next version, with the fields this batch turns into columns, written BEFORE
        the batch's commit: a crash between the two leaves a stored schema that declares columns the table
        does not have yet, and the next run adds them (the change a declared schema makes, before its first
        batch); the other order would leave columns in the table that every later run rescues again."""
        checkpoint = checkpoint_files.checkpoint(spark, self.target.schema_checkpoint)
        found = checkpoint.latest_schema()
        if found is None:
            return
        new = next_version(SchemaVersion.model_validate(found),
                           [(f.name, type_ddl(spark, f.dataType)) for f in fields],
                           run_id=self.target.run_id, batch_id=batch_id)
        if new is not None:
            checkpoint.write_schema(new.model_dump())
            stats["schema_version"] = new.version

    def _expectation_rows(self, rows: DataFrame, violated: dict[str, Column], quarantine_flag: Column,
                          batch_id: int) -> DataFrame:
        """The quarantine rows of the rows that violate a ``quarantine`` expectation."""
        error, names = quarantine_reason(self.spec.expectations, violated)
        return self._quarantine_rows(rows.where(quarantine_flag), batch_id, F.lit(None), row_json(rows), error, names)

    def _expectations(self, rows: DataFrame, batch_id: int, stats: dict[str, Any]) -> tuple[DataFrame, list[DataFrame]]:
        """Counts every expectation's violations over the batch (``fail`` refuses it), leaves the dropped
        and quarantined rows out; returns the rows to write and the quarantine's."""
        violated, quarantine_flag, drop_flag = violations(self.spec.expectations)
        counts = count_violations(rows, self.spec.expectations, batch_id, stats)
        parts = [self._expectation_rows(rows, violated, quarantine_flag, batch_id)] if counts["__quarantined"] else []
        if counts["__dropped"] or counts["__quarantined"]:
            rows = rows.where(~quarantine_flag & ~drop_flag)
        return rows, parts


def _observed(observation: Observation) -> bool:
    """Whether the write that carried ``observation`` ran (Spark completes it as the write returns); Delta
    skipping a transaction it has committed runs no query, and leaves it incomplete (``get`` would wait)."""
    return bool(observation._jo.future().isCompleted())


def _union(parts: list[DataFrame]) -> DataFrame:
    rows = parts[0]
    for part in parts[1:]:
        rows = rows.unionByName(part)
    return rows
