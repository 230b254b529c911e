"""One run of one pipeline: source -> transform -> Delta sink, one one-shot query, then the run summary."""

from __future__ import annotations

import dataclasses
import functools
import tempfile
import time
import uuid

from pyspark.sql import SparkSession

from sluice.contract import (
    JobRequest,
    ReingestReport,
    RunSummary,
)
from sluice.operations import idle
from sluice.operations.catalog import CatalogError
from sluice.schema.stored import store_missing
from sluice.settings import Settings
from sluice.spec import DeltaSource, FileSource, KafkaSource, PipelineSpec
from sluice.spec.catalog import resolve_upstream
from sluice.storage.checkpoint import BAD_RECORDS_CHECKPOINT, Checkpoint
from sluice.storage.delta_log import log_state
from sluice.storage.files import Storage, is_local_uri
from sluice.storage.lock import PipelineBusy
from spark_jobs.batch.transform import query_output, register_tables
from spark_jobs.batch.writer import (
    BatchWriter,
    source_reads,
)
from spark_jobs.corrections import upstream
from spark_jobs.driver import jit
from spark_jobs.driver.context import Place, Run
from spark_jobs.driver.errors import describe_error
from spark_jobs.driver.job import JobFailed, JobRecord
from spark_jobs.driver.progress import ProgressCollector
from spark_jobs.quality.quarantine import quarantine_pending
from spark_jobs.run import backlog, clean_source, head_start, overwrite_check
from spark_jobs.run.report import COUNTS, Ran, ran_batches, totals
from spark_jobs.sinks import checkpoint_files, guards, names, schema_evolution
from spark_jobs.sinks.delta_table import (
    current_version,
    txn_version,
)
from spark_jobs.sinks.table import Target, output_mode, start_write, txn_app_id
from spark_jobs.sources import archive, overwrites
from spark_jobs.sources.files import (
    discovery_report,
    explain_delta_failure,
    indexed,
    read_stream,
)
from spark_jobs.sources.inference import source_schema
from spark_jobs.sources.kafka import explain_failure

DRY_RUN_PREFIX = "sluice-dry-run-"
MIN_BATCHES_TO_RETAIN = "spark.sql.streaming.minBatchesToRetain"


class RunFailed(JobFailed):
    """The query failed; ``summary`` holds what was known, with ``status: failed`` and the ``error``."""


def run_pipeline(spark: SparkSession, spec: PipelineSpec, settings: Settings, job: JobRequest) -> RunSummary:
    """Run the pipeline's query once to completion and return the run summary (also appended to the ledger).

    A real run holds the pipeline's driver lock, checks that checkpoint, table and spec belong together
    (:mod:`spark_jobs.sinks.guards`) and creates the table, with the pipeline's identity, on first use.
    A dry run reads from a copy of the checkpoint and writes to a scratch table (a shallow clone of the
    real one), both deleted afterwards: the real checkpoint and table are not touched, and the summary says
    what the next real run would do. Raises :class:`RunFailed` (carrying the summary) if the run fails.
    """
    loaded = spec  # as its file says: what the next run's idle check compares (sluice.operations.idle)
    spec = resolve_upstream(_with_rate_limits(spec, job), settings)  # a Delta source's table, read once
    table = spec.sink_path(settings)
    checkpoint = spec.checkpoint_path(settings)
    record = JobRecord(
        spec, settings, job,
        sink=table, checkpoint=checkpoint, checkpoint_id=None, batches=0, input_rows=0, output_rows=0,
        delta_version_before=current_version(spark, table), delta_version_after=None,
        micro_batches=[], skipped_batches=[],
        # data quality (spark_jobs.batch.writer): records that did not parse or fit the schema, and where
        # they went; fields beyond the schema kept in _rescued; expectation counts
        bad_records=0, quarantined_rows=0, dropped_rows=0, rescued_rows=0, expectations={},
        quarantine=spec.quarantine_table_path(settings),
    )
    summary = record.summary
    scratch = _scratch_folder(spec, checkpoint) if job.dry_run else None

    real = Place(table=table, checkpoint=checkpoint, quarantine=summary.quarantine)
    run = Run(spark, spec, settings, job, summary, real=real, target=Place.scratch(scratch) if scratch else real)

    # a real run (not a backfill: it never touches the checkpoint) that ends well lets the next one be idle
    marks_idle = not job.dry_run and job.backfill is None

    def body() -> None:
        nonlocal spec
        spec = run.spec = names.named_upstream(spark, spec, settings)  # a table no pipeline here writes
        _list_local_files_on_the_driver(spark, spec, settings)
        _read_schema(run)  # under the driver lock: two first runs cannot each store a version 0
        if job.backfill is not None:
            from spark_jobs.corrections.backfill import run_backfill

            jit.release(spark, "a backfill")

            # a backfill reads with the schema in use and stores nothing: it never writes the checkpoint
            run_backfill(run)
        else:
            cleans = isinstance(spec.source, FileSource) and spec.source.clean_source is not None
            if cleans:
                archive.check_folders(spec, settings)  # before anything runs: a bad archive_dir is an error
            measured = backlog.before_query(spec, settings)  # or the query's own listing (spark_jobs.run.backlog)
            head_start.warm_when_waiting(run, measured)  # Kafka: Delta's state, once records are known to wait
            jit.decide(spark, measured, indexed=indexed(spec))  # C2 for a large run (spark_jobs.driver.jit)
            _run_query(run)
            summary.backlog_before = backlog.after_query(spec, settings, summary.discovery, measured, summary.error)
            if cleans and not job.dry_run and summary.error is None:
                _clean_source(run)
            if not job.dry_run:
                summary.backlog_after = backlog.at_end(spark, spec, settings, run.target.checkpoint, summary.error)
        if not job.dry_run:
            _register_names(run)  # after the data is committed (a backfill's too)
        if marks_idle and summary.error is None:
            kept = Checkpoint(run.real.checkpoint)
            done = kept.done()
            idle.remember(kept, loaded, settings, batch=done[-1] if done else None,
                          delta_version=current_version(spark, run.real.table))

    try:
        record.run(body, refusals=(guards.GuardRefused,))
    finally:
        summary.driver_jit = jit.report(spark, settings.driver_jit)
        backlog.forget(spark, spec, run.target.checkpoint)
        if scratch is not None:
            Storage(scratch).delete_dir()
    return record.close(RunFailed)


def _read_schema(run: Run) -> None:
    """A file source without ``source.schema`` (a Kafka json value without ``value.schema``): the run reads
    with the stored schema, or, on its first run, infers it from a sample of the files (of the topic's
    records) (:mod:`spark_jobs.sources.inference`); ``run.spec`` is then the spec with
    that schema, for every part of the run. A dry run shows what it inferred and stores nothing."""
    spec, versions, inferred = source_schema(run.spark, run.spec, run.settings, run.real.checkpoint,
                                             run.job.run_id)
    if not versions:
        return
    run.spec, run.schemas = spec, versions
    run.summary.schema_version = versions[-1].version
    if inferred is not None:
        sample = ({"records": inferred.records, "topics": inferred.topics} if inferred.records is not None
                  else {"files": inferred.files})
        run.summary.schema_inferred = {"version": inferred.version, "ddl": inferred.ddl, **sample,
                                       "hints": inferred.hints, "stored": False}


def _keep_schema(run: Run) -> None:
    """Store the versions the run's checkpoint does not hold, before the query starts: a first run's version 0
    (so every later run reads with it), or the whole history again in the new checkpoint of a reset."""
    if run.dry_run or not run.schemas:
        return
    written = store_missing(checkpoint_files.checkpoint(run.spark, run.target.checkpoint), run.schemas)
    if run.summary.schema_inferred is not None and 0 in written:
        run.summary.schema_inferred["stored"] = True
    # a version made by this run because the spec's schema_hints changed (not one a reset stores again)
    hinted = [v.version for v in run.schemas if v.version in written and v.reason == "hints"
              and v.run_id == run.job.run_id]
    if hinted:
        run.summary.schema_versions_added = hinted


def _clean_source(run: Run) -> None:
    """Archive or delete the landing files whose rows are committed (:mod:`spark_jobs.run.clean_source`): after a
    real run whose query (and reingest) succeeded, under its lock. A file that cannot be cleaned fails the run
    (its rows are committed all the same); the next run goes on where this one stopped."""
    mark = time.monotonic()
    try:
        run.summary.cleaned_files = clean_source.clean(run.spec, run.settings, run.real.checkpoint, run.real.table)
    except Exception as err:  # noqa: BLE001 - the summary's error, raised by the caller
        run.summary.error = f"cleaning the source files (source.clean_source): {describe_error(err)}"
    run.summary.note_phase("clean_source", time.monotonic() - mark)


def _scratch_folder(spec: PipelineSpec, checkpoint: str) -> str:
    """Where a dry run writes its copies: a temporary folder on the driver's disk; beside the checkpoints when
    they are on an object store (executors on other hosts write the scratch table too), deleted after."""
    if is_local_uri(checkpoint):
        return tempfile.mkdtemp(prefix=DRY_RUN_PREFIX + f"{spec.name}-")
    root = checkpoint.rstrip("/").rsplit("/", 1)[0]
    return f"{root}/_dry_runs/{DRY_RUN_PREFIX}{spec.name}-{uuid.uuid4().hex[:12]}"


def _with_rate_limits(spec: PipelineSpec, job: JobRequest) -> PipelineSpec:
    """The run's own rate limit (the DAG's params, sluice run's options) over the spec's."""
    limits = {"max_files_per_trigger": job.run.max_files_per_trigger,
              "max_offsets_per_trigger": job.run.max_offsets_per_trigger}
    limits = {key: value for key, value in limits.items() if value is not None and key in type(spec.source).model_fields}
    return spec.model_copy(update={"source": spec.source.model_copy(update=limits)}) if limits else spec


def _run_query(run: Run) -> None:
    spark, spec, settings, options, summary = run.spark, run.spec, run.settings, run.job, run.summary
    table, checkpoint = run.real.table, run.real.checkpoint
    target_table, target_checkpoint, quarantine = run.target.table, run.target.checkpoint, run.target.quarantine
    collector = ProgressCollector(query_name=spec.name)
    query = writer = new_table = None
    checked = overwrite_check.Checked()
    phases, mark = summary.phases_s, time.monotonic()
    head = head_start.start(run)  # the rewritten-file check's listing, and Delta's state, beside the preparing
    spark.streams.addListener(collector)
    # the checkpoint keeps this many batches' offsets and commits (and state versions); older ones are
    # deleted as the query runs, so a checkpoint does not grow over thousands of runs
    retain = spec.spark_conf.get(MIN_BATCHES_TO_RETAIN, spec.maintenance.checkpoint_batches_to_retain)
    spark.conf.set(MIN_BATCHES_TO_RETAIN, str(retain))
    try:
        # upstream commits that changed rows (spark_jobs.corrections.upstream): a promotion of rescued values is done again
        # in this table, a slice rebuilt up there is rebuilt here after the stream, anything else rebuilds
        # this table whole (a reset)
        follow = _upstream_plan(run) if not options.reset else None
        if follow is not None and follow.action != "none":
            summary.upstream_changes = follow.summary()
            if follow.action == "reset":
                options = run.job = options.as_reset()
        skip_changes = follow is not None and follow.skips_changes
        promoted_upstream = (follow.promoted or None) if skip_changes else None
        source = read_stream(spark, spec, settings, skip_change_commits=skip_changes)
        register_tables(spark, spec.transform, settings)
        query_df, stateful, schema = query_output(spark, spec, source)
        if options.reset:
            archive.refuse_reset(spec, settings, checkpoint)  # files cleaned away are not in the source
        if not run.dry_run:
            if not options.reset:
                guards.check_spec_fits(spec, settings, checkpoint)
            followed = follow is not None and follow.action == "reset"
            prepared = guards.prepare_sink(run, schema, aside_label="followed" if followed else "replaced")
            cp_id, change, new_table = prepared.checkpoint_id, prepared.change, prepared.new_table
            if prepared.aside:
                summary.replaced_checkpoint = prepared.aside
            if options.reset:
                guards.empty_quarantine(spark, quarantine)
            _keep_schema(run)
        else:
            cp_id, change = _prepare_dry_run(run, schema)
            new_table = None  # a dry run's scratch table is created before its query, as the real one was
        guards.record_spec(spec, settings, target_checkpoint)
        if follow is not None and follow.action == "rebuild":
            # before the stream skips a change: a run killed before the rebuild is committed rebuilds it again
            upstream.write_pending(spark, target_checkpoint, follow.start, follow.deferred)
        summary.checkpoint_id = cp_id
        evolve = bool(change and (change.added or change.widened))
        if evolve:
            summary.schema_change = {"table": table, **change.summary(), "applied": False}
        # rescued values to bring into new columns: this pipeline's own (a field declared now), or the ones its
        # upstream pipeline promoted in rows this table holds too
        promote = [c for c, _ in change.added] if change is not None and spec.rescues_fields() else []
        promote += promoted_upstream or []
        unmarked = schema_evolution.mark_promotion(spark, target_table, target_checkpoint, promote) if promote else []
        target = Target(table=target_table, quarantine=quarantine, app_id=txn_app_id(spec.identity, cp_id),
                        run_id=options.run_id, checkpoint=target_checkpoint, evolve_schema=evolve,
                        widen_types=bool(change and change.widened),
                        schema_checkpoint=(target_checkpoint if run.schemas and not run.dry_run
                                           and spec.schema_evolution == "add_columns" else None),
                        new_table=new_table)
        # a batch planned but not marked done in the checkpoint, whose transaction the table already has
        # (a crash between the two commits): skip it without reading its input
        committed = _committed_replay(spark, target_checkpoint, target_table, target.app_id)
        checked = overwrite_check.check(run, target, committed, head)
        phases["prepare"], mark = round(time.monotonic() - mark, 3), time.monotonic()
        if stateful and spec.parses_records():
            # an aggregation's output rows are not input records: a companion query, with its own checkpoint
            # inside the pipeline's, sets the source's bad records aside (before the main query, so that
            # on_bad_records: fail stops the run before the table changes)
            companion = BatchWriter(spec, _bad_target(target), transform=False, bad_only=True)
            writer = companion
            bad_query = start_write(
                source, batch_function=companion, checkpoint=f"{target_checkpoint}/{BAD_RECORDS_CHECKPOINT}",
                trigger=options.trigger, query_name=f"{spec.name}_bad_records", mode="append",
            )
            bad_query.awaitTermination()
            summary.bad_records_query = {"batches": len(companion.stats), **totals(companion.stats.values())}
        writer = BatchWriter(spec, target, transform=not stateful, skip_batches=committed)
        collector.reads_of = functools.partial(source_reads, writer.stats)
        query = start_write(
            query_df, batch_function=writer, checkpoint=target_checkpoint, trigger=options.trigger,
            query_name=spec.name, mode=output_mode(spec),
        )
        query.awaitTermination()  # raises StreamingQueryException if the query failed
        checked.finish()  # on_overwrite: warn's report, its listing done beside the query
        if new_table is not None:
            guards.create_if_missing(spark, spec, target_table, new_table)  # no batch wrote: created empty
        if evolve:
            after = schema_evolution.plan(spark, spec, target_table, schema)
            if (after.added or after.widened) and not stateful:
                # no batch carried the change (no new data): made now, in metadata-only commits. A stateful
                # query's is left to its next batch: Spark checks then whether its state can take it
                schema_evolution.apply_change(spark, target_table, after)
                after = schema_evolution.plan(spark, spec, target_table, schema)
            summary.schema_change["applied"] = not (after.added or after.widened)
        promoted = schema_evolution.promote_pending(spark, target_table, target_checkpoint, options.run_id,
                                                    unmarked)
        if promoted:
            summary.promoted_rescued = promoted
        if follow is not None and follow.action == "none":
            upstream.clear_pending(spark, target_checkpoint)
        if follow is not None and follow.action == "rebuild":
            phases["query"], mark = round(time.monotonic() - mark, 3), time.monotonic()
            summary.upstream_changes = upstream.rebuild(run, follow)
            phases["rebuild"] = round(time.monotonic() - mark, 3)
    except (PipelineBusy, guards.GuardRefused):
        raise
    except Exception as err:  # noqa: BLE001 - every failure becomes the summary's error, raised by the caller
        checked.finish(quietly=True)
        failure = writer.failure if writer is not None else None  # the batch's own error, not Spark's wrapper
        summary.error = describe_error(failure or err)
        if isinstance(spec.source, KafkaSource):
            summary.error = explain_failure(spec.source, summary.error)
        elif isinstance(spec.source, DeltaSource):
            summary.error = explain_delta_failure(spec, summary.error)
        summary.error = guards.explain_state_failure(spec, summary.error, checkpoint)
        if new_table is not None:
            _leave_new_table(run, new_table)
    finally:
        spark.streams.removeListener(collector)
        if query is not None and "rebuild" not in phases:
            phases["query"] = round(time.monotonic() - mark, 3)
        mark = time.monotonic()
    summary.delta_version_after = current_version(spark, table)
    if query is not None:
        summary.update(**ran_batches(run, Ran(query, collector, writer.stats), target,
                                      before=None if run.dry_run else summary.delta_version_before,
                                      latest=None if run.dry_run else summary.delta_version_after))
        if (discovered := discovery_report(spark, spec, target.checkpoint)) is not None:
            summary.discovery = discovered
        phases["report"] = round(time.monotonic() - mark, 3)
        added = sorted(s["schema_version"] for s in writer.stats.values() if "schema_version" in s)
        if added:
            summary.schema_versions_added = [*(summary.schema_versions_added or []), *added]
        if checked.reingest and summary.error is None:
            mark = time.monotonic()
            _run_reingest(run, target)
            phases["reingest"] = round(time.monotonic() - mark, 3)
    for key, value in totals([summary.bad_records_query or {}]).items():
        setattr(summary, key, getattr(summary, key) + value)


def _register_names(run: Run) -> None:
    """The pipeline's named tables registered in the catalog (:mod:`spark_jobs.sinks.names`), after the data
    is committed: a catalog that fails the registration fails the run, the data stays committed."""
    spec, settings, summary = run.spec, run.settings, run.summary
    if not spec.table_name(settings) and not spec.quarantine_table_name(settings):
        return
    mark = time.monotonic()
    try:
        summary.catalog = names.register_tables(run.spark, spec, settings, table=run.real.table,
                                                quarantine=run.real.quarantine)
    except (CatalogError, names.NameTaken) as err:
        summary.catalog = {"uri": settings.metastore_uri, "table": spec.table_name(settings), "error": str(err)}
        summary.error = f"{summary.error}; and {err}" if summary.error else str(err)
    summary.phases_s["catalog"] = round(time.monotonic() - mark, 3)


def _leave_new_table(run: Run, new_table) -> None:
    """A failed run that was to create its table in its first write leaves it, empty and with its identity,
    as when the table was created before the query (a run killed before its first commit leaves none)."""
    try:
        guards.create_if_missing(run.spark, run.spec, run.target.table, new_table)
    except Exception as err:  # noqa: BLE001 - the run's own error comes first
        if run.summary.error.startswith("no space left on device"):
            return  # the same full disk again: the run's error already says what to do
        run.summary.error += f" (creating its table {run.target.table} failed too: {describe_error(err)})"


def _upstream_plan(run: Run) -> upstream.Plan | None:
    spec, table = run.spec, run.real.table
    if not isinstance(spec.source, DeltaSource):
        return None
    state = log_state(table)
    columns = state["columns"] if state is not None else (guards.table_state(run.spark, table) or {}).get("columns")
    return upstream.plan(spec, spec.source_path(run.settings), run.real.checkpoint, table, columns)


def _run_reingest(run: Run, target: Target) -> None:
    """The companion query of ``on_overwrite: reingest``: the copies of rewritten files, through the same
    reader, transform and writer into the same tables, with a checkpoint and transaction id of its own."""
    spark, spec, summary = run.spark, run.spec, run.summary
    staging = overwrites.staging_folder(target.checkpoint)
    reingest_spec = spec.model_copy(update={"source": spec.source.model_copy(update={"path": str(staging)})})
    checkpoint = overwrites.companion_checkpoint(target.checkpoint)
    companion = dataclasses.replace(target, app_id=f"{target.app_id}-reingest", checkpoint=checkpoint)
    collector = ProgressCollector(query_name=f"{spec.name}_reingest")
    before = summary.delta_version_after
    spark.streams.addListener(collector)
    writer = query = None
    try:
        query_df, _, _ = query_output(spark, reingest_spec, read_stream(spark, reingest_spec, run.settings))
        writer = BatchWriter(reingest_spec, companion, transform=True,
                             skip_batches=_committed_replay(spark, checkpoint, target.table, companion.app_id))
        collector.reads_of = functools.partial(source_reads, writer.stats)
        query = start_write(query_df, batch_function=writer, checkpoint=checkpoint, trigger=run.job.trigger,
                            query_name=f"{spec.name}_reingest", mode=output_mode(spec))
        query.awaitTermination()
    except Exception as err:  # noqa: BLE001 - the summary's error, raised by the caller
        failure = writer.failure if writer is not None else None
        summary.error = f"reingesting rewritten files: {describe_error(failure or err)}"
    finally:
        spark.streams.removeListener(collector)
    summary.delta_version_after = current_version(spark, summary.sink)
    if query is None:
        return
    part = ran_batches(run, Ran(query, collector, writer.stats), companion,
                        before=None if run.dry_run else before,
                        latest=None if run.dry_run else summary.delta_version_after)
    summary.reingest = ReingestReport(**{key: part.get(key, field.default)
                                         for key, field in ReingestReport.model_fields.items()})
    for key in ("input_rows", "output_rows", *COUNTS):
        setattr(summary, key, getattr(summary, key) + part.get(key, 0))
    if summary.error is None:
        overwrites.delete_ingested_copies(target.checkpoint)


LISTING_THRESHOLD = "spark.sql.sources.parallelPartitionDiscovery.threshold"
LOCAL_LISTING_THRESHOLD = "10000"


def _list_local_files_on_the_driver(spark: SparkSession, spec: PipelineSpec, settings: Settings) -> None:
    """A file source on local disk: list a batch's files on the driver, not with a Spark job.

    Spark lists the files of a batch of more than 32 paths with a Spark job (InMemoryFileIndex's parallel
    listing), and a restarted query builds its last batch's DataFrame again (MicroBatchExecution calls
    getBatch for it before asking for new offsets): so a run that found nothing ran a listing job as large
    as the previous run's batch. On local disk a stat per file on the driver costs far less than a job
    (an object store's listing stays parallel). A spec's ``spark_conf`` setting wins."""
    if not isinstance(spec.source, FileSource) or LISTING_THRESHOLD in spec.spark_conf:
        return
    if is_local_uri(spec.source_path(settings)):
        spark.conf.set(LISTING_THRESHOLD, LOCAL_LISTING_THRESHOLD)


def _committed_replay(spark: SparkSession, checkpoint: str, table: str, app_id: str) -> set[int]:
    pending = Checkpoint(checkpoint).pending_batch()
    if pending is None or quarantine_pending(spark, checkpoint) == pending:
        # a crash after the batch's sink commit but before its quarantine rows: read it again for them
        return set()
    version = txn_version(table, app_id)
    return {pending} if version is not None and version >= pending else set()


def _bad_target(target: Target) -> Target:
    return Target(table=target.table, quarantine=target.quarantine, app_id=f"{target.app_id}-bad-records",
                  run_id=target.run_id, checkpoint=target.checkpoint)


def _prepare_dry_run(run: Run, schema):
    """Scratch checkpoint and table for a dry run; the same refusals a real run would meet. Returns the
    checkpoint id and the change the run makes to the table's schema."""
    spark, spec, settings, options = run.spark, run.spec, run.settings, run.job
    table, checkpoint = run.real.table, run.real.checkpoint
    target_table, target_checkpoint = run.target.table, run.target.checkpoint
    if options.reset:
        cp_id = Checkpoint(target_checkpoint).ensure_query_id()
        guards.create_table(spark, target_table, schema, spec, cp_id)
        return cp_id, None
    guards.check_spec_fits(spec, settings, checkpoint)
    state = guards.check_sink(spark, spec, table=table, checkpoint=checkpoint)
    change = guards.check_schema(spark, spec, table=table, schema=schema) if state is not None else None
    Storage(checkpoint).copy_to(Storage(target_checkpoint))
    cp_id = Checkpoint(target_checkpoint).ensure_query_id()
    if state is None:
        guards.create_table(spark, target_table, schema, spec, cp_id)
    else:
        # the real table's files, referenced not copied: a MERGE sees the rows it would update
        spark.sql(f"CREATE TABLE delta.`{target_table}` SHALLOW CLONE delta.`{table}`")
    return cp_id, change
