"""The pipeline commands: ``sluice validate``, ``run``, ``maintain``, ``show``, ``status``, ``schema``, ``backlog``.

Each resolves its SPEC (a spec file, or a pipeline's name in the pipelines folder) and takes the path every entry
point takes: the spec model, the run request, the launcher (:mod:`sluice.launch`), the driver."""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import tempfile
from datetime import datetime, timezone
from pathlib import Path

from sluice.contract.quality import quality_warnings
from sluice.launch.environment import project_env
from sluice.schema.change import next_change
from sluice.settings import Settings
from sluice.spec import KafkaSource, SpecError, load_spec
from sluice.spec.catalog import PipelineCatalog, spec_files


def resolve_spec_path(arg: str, settings: Settings) -> Path:
    """A spec file path, a pipeline name or its table's catalog name, looked up in the pipelines folder."""
    return PipelineCatalog(settings.pipelines_dir).resolve(arg, settings)


def _apply_env(settings: Settings) -> None:
    settings.airflow_home.mkdir(parents=True, exist_ok=True)
    os.environ.update(project_env(settings))


def cmd_validate(args: argparse.Namespace, settings: Settings) -> int:
    """Each spec (a file or a pipeline name; every spec of the folder by default), and what its next run would
    refuse that is knowable without a JVM: a table another pipeline writes, a sink shared with another spec of
    the folder, a schema change the table cannot take; and, for a spec of the pipelines folder, what the
    folder refuses (a name used twice, a renamed pipeline's old spec left beside it, an unknown upstream)."""
    from sluice.spec.catalog import sink_conflict, sinks_of

    catalog = PipelineCatalog.load(settings.pipelines_dir)  # the folder, read once
    sinks = sinks_of(catalog, settings)
    in_folder = {Path(err.source).resolve(): err for err in catalog.errors}
    bad = 0
    for arg in args.specs or [str(p) for p in spec_files(settings.pipelines_dir)]:
        try:
            path = catalog.resolve(arg, settings)
            spec = catalog.readable.get(path) or load_spec(path)
            if path.resolve() in in_folder:
                raise in_folder[path.resolve()]
        except SpecError as err:
            bad += 1
            print(f"invalid: {err}", file=sys.stderr)
            continue
        conflict = sink_conflict(spec, path, settings, sinks)
        if conflict:
            bad += 1
            print(f"refused: {path}: the next run would be refused: {conflict}", file=sys.stderr)
            continue
        print(f"ok: {path} (pipeline {spec.name})")
        for warning in spec.warnings():
            print(f"warning: {path}: {warning}", file=sys.stderr)
        # the schema change the next run would make to the table (read from its Delta log, no JVM)
        change, line = next_change(spec, settings)
        if change is not None and change.refused:
            bad += 1
            print(f"refused: {path}: the next run would be refused: {line}", file=sys.stderr)
        elif change:
            print(f"schema: {path}: {line}")
    return 1 if bad else 0


def cmd_run(args: argparse.Namespace, settings: Settings) -> int:
    names = args.spec if isinstance(args.spec, list) else [args.spec]
    if args.reset_checkpoint and (args.backfill_from or args.backfill_to):
        print("sluice: --reset-checkpoint and --backfill-from/--backfill-to: choose one; a reset rebuilds the "
              "whole table from the source, a backfill some days of it", file=sys.stderr)
        return 2
    jobs = []
    for name in names:
        made = _run_job(name, args, settings)
        if isinstance(made, int):
            return made
        jobs.append(made)
    if len({spec.identity for _, spec in jobs}) < len(jobs):
        print("sluice: a pipeline is named twice: name each once", file=sys.stderr)
        return 2
    _apply_env(settings)

    from sluice_airflow.kafka_connection import kafka_secret_env

    from sluice.launch.launcher import lock_for

    # a real run holds the pipeline's lock from before spark-submit to its end: a second run is refused at once;
    # kafka_secret_env reads Airflow only for a spec that names a Kafka connection
    locks = [lock_for(job, spec.identity, settings) for job, spec in jobs]
    secrets = [kafka_secret_env(spec) for _, spec in jobs]
    airflow_free = not any(getattr(spec.source, "connection", None) for _, spec in jobs)
    if len(jobs) == 1:
        (job, spec), = jobs
        return _launch(job, spec, settings, locks[0], secret_env=secrets[0], airflow_free=airflow_free)
    return _launch_group(jobs, settings, locks, secrets, airflow_free=airflow_free)


def _run_job(name: str, args: argparse.Namespace, settings: Settings):
    """The job request of one pipeline of ``sluice run``, and its spec; or the exit code of a refusal."""
    spec_path = resolve_spec_path(name, settings)
    spec = load_spec(spec_path)
    for warning in spec.warnings():
        print(f"warning: {spec_path}: {warning}", file=sys.stderr)
    from sluice.contract.request import CLI_NAMES, RunRequestError, run_request

    backfill = bool(args.backfill_from or args.backfill_to)
    try:
        request = run_request(
            spec, mode="backfill" if backfill else "reset" if args.reset_checkpoint else "incremental",
            trigger=args.trigger, max_files_per_trigger=args.max_files_per_trigger,
            max_offsets_per_trigger=args.max_offsets_per_trigger, backfill_from=args.backfill_from,
            backfill_to=args.backfill_to, test_mode=args.dry_run, names=CLI_NAMES,
        )
    except RunRequestError as err:
        print(f"sluice: {spec.name}: {err}", file=sys.stderr)
        return 2
    from sluice.contract import JobRequest

    run_id = "cli__" + datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S") + f"_{os.getpid()}"
    return JobRequest(spec_path=str(spec_path), run_id=run_id, run=request), spec


def cmd_maintain(args: argparse.Namespace, settings: Settings) -> int:
    spec_path = resolve_spec_path(args.spec, settings)
    spec = load_spec(spec_path)
    if args.wait < 0:
        print(f"sluice: --wait {args.wait}: give the seconds to wait for a running run (0: refuse at once)",
              file=sys.stderr)
        return 2
    _apply_env(settings)
    from sluice.contract import maintain_job
    from sluice.launch.launcher import lock_for

    run_id = "cli_maintain__" + datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S") + f"_{os.getpid()}"
    job = maintain_job(spec_path=str(spec_path), run_id=run_id, dry_run=args.dry_run)
    lock = lock_for(job, spec.identity, settings, wait_seconds=args.wait)
    return _launch(job, spec, settings, lock)


def _launch(job, spec, settings: Settings, lock, *, secret_env=None, airflow_free: bool = True) -> int:
    """Launch the job (:func:`sluice.launch.launcher.launch`); print its summary as the last stdout line. Exit 0 if
    it succeeded, else 1 (the summary, when the driver wrote one, is printed all the same)."""
    from sluice.launch.launcher import JobFailed, launch
    from sluice.launch.submit import build_plan

    # Without an Airflow connection to read (the Spark master defined in the environment, as the project
    # does; no Kafka connection named in the spec), the command is built here and Airflow is not imported.
    submit = _submitter(settings, airflow_free)
    with tempfile.TemporaryDirectory(prefix=f"sluice-{'maintain' if job.kind == 'maintain' else 'run'}-") as tmp:
        plan = build_plan(job, spec, settings, workdir=Path(tmp), secret_env=secret_env)
        try:
            summary = launch(plan, lock, submit)
        except JobFailed as failed:
            if failed.summary is None or failed.refused_here:
                print(f"sluice: {failed}", file=sys.stderr)
            if failed.summary is None:
                return 1
            summary = failed.summary
    data = summary.to_json()
    if job.kind == "run":
        for warning in quality_warnings(summary):
            print(f"warning: {warning}", file=sys.stderr)
        inferred = data.get("schema_inferred")
        if inferred:
            kept = "stored as version 0" if inferred["stored"] else "not stored (a dry run stores nothing)"
            sample = (f"{inferred['records']} record(s) of {', '.join(inferred['topics'])}" if "records" in inferred
                      else f"{len(inferred['files'])} file(s)")
            print(f"schema: inferred from {sample}, {kept}: {inferred['ddl']}", file=sys.stderr)
    print(json.dumps(data))
    return 0 if summary.succeeded else 1


def _submitter(settings: Settings, airflow_free: bool, *, shared: bool = True):
    """How the plan's spark-submit runs: a plain subprocess when the Spark master is defined in the environment
    and nothing needs Airflow, else through Airflow's hook (the connection checked first). With
    ``SLUICE_SHARED_DRIVER=host`` (and ``shared``: one pipeline's job), the job is handed to this host's
    long-lived driver instead (:mod:`sluice.launch.host`), started against the same master."""
    from sluice.launch.launcher import subprocess_submit
    from sluice.launch.submit import env_spark_master

    master = env_spark_master(settings.spark_conn_id) if airflow_free else None
    if master is None:
        from sluice_airflow.spark_connection import require_spark_connection

        require_spark_connection(settings.spark_conn_id)
    if shared and settings.shared_driver == "host":
        if master is not None:
            from sluice.launch.host import host_submit

            return host_submit(settings, master)
        from sluice_airflow.hook import SluiceSubmitHook

        handed = SluiceSubmitHook(conn_id=settings.spark_conn_id).host_submit(settings)
        if handed is not None:
            return handed
    return subprocess_submit(master) if master is not None else _airflow_submit


def _launch_group(jobs, settings: Settings, locks, secrets, *, airflow_free: bool) -> int:
    """Several pipelines in one driver (:func:`sluice.launch.launcher.launch_group`): a summary line each on
    stdout, in the order named; exit 0 if every one succeeded, else 1."""
    from sluice.launch.launcher import JobFailed, launch_group
    from sluice.launch.submit import GroupRefused, build_plan, group_plan

    submit = _submitter(settings, airflow_free, shared=False)  # a group is one driver of its own
    with tempfile.TemporaryDirectory(prefix="sluice-run-") as tmp:
        plans = []
        for n, ((job, spec), secret_env) in enumerate(zip(jobs, secrets, strict=True)):
            (Path(tmp) / str(n)).mkdir()
            plans.append(build_plan(job, spec, settings, workdir=Path(tmp) / str(n), secret_env=secret_env))
        try:
            group_plan(plans)  # said before any lock is taken
        except GroupRefused as refused:
            print(f"sluice: {refused}", file=sys.stderr)
            return 2
        outcomes = launch_group(plans, locks, submit)
    code = 0
    for (job, spec), outcome in zip(jobs, outcomes, strict=True):
        if isinstance(outcome, JobFailed):
            code = 1
            if outcome.summary is None or outcome.refused_here:
                print(f"sluice: {outcome}", file=sys.stderr)
            if outcome.summary is None:
                continue
            outcome = outcome.summary
        for warning in quality_warnings(outcome):
            print(f"warning: {spec.name}: {warning}", file=sys.stderr)
        print(json.dumps(outcome.to_json()), flush=True)
    return code


def _airflow_submit(plan) -> None:
    """The plan's spark-submit through Airflow's hook: connections from Airflow's database or secrets."""
    from sluice_airflow.hook import SluiceSubmitHook

    from sluice.launch.launcher import stdout_to_stderr

    # after Airflow's import, which configures logging its own way: the hook's lines go to stderr
    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stderr, force=True)
    with stdout_to_stderr():
        SluiceSubmitHook(**plan.hook_kwargs()).submit(plan.application)


def cmd_show(args: argparse.Namespace, settings: Settings) -> int:
    spec = load_spec(resolve_spec_path(args.spec, settings))
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from spark_jobs.run.show import show_table

    show_table(spec, settings, limit=args.limit)
    return 0


def cmd_status(args: argparse.Namespace, settings: Settings) -> int:
    spec = load_spec(resolve_spec_path(args.spec, settings))
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from sluice.operations.status import show_status

    return show_status(spec, settings, limit=args.limit, as_json=args.json)


def cmd_schema(args: argparse.Namespace, settings: Settings) -> int:
    """The versions of an inferred source schema, stored in the checkpoint (no Spark, no Airflow)."""
    from sluice.schema.stored import history, infers_schema

    spec = load_spec(resolve_spec_path(args.spec, settings))
    checkpoint = spec.checkpoint_path(settings)
    versions = history(checkpoint) if infers_schema(spec) else []
    if args.json:
        print(json.dumps({"pipeline": spec.name, "checkpoint": checkpoint, "declared": not infers_schema(spec),
                          "versions": [v.model_dump() for v in versions]}))
        return 0
    if not infers_schema(spec):
        holder = spec.source.value if isinstance(spec.source, KafkaSource) else spec.source
        declared = getattr(holder, "schema_", None) or "(none: the source's columns are fixed)"
        print(f"{spec.name}: the spec declares the source's schema, nothing is inferred: {declared}")
        return 0
    if not versions:
        where = (f"the records of topic(s) {', '.join(spec.source.topics or [spec.source.subscribe_pattern])}"
                 if isinstance(spec.source, KafkaSource) else f"the files in {spec.source_path(settings)}")
        print(f"{spec.name}: no stored schema yet in {checkpoint}: the first run infers it from {where} "
              f"(sluice run {spec.name} --dry-run shows what it would infer)")
        return 0
    from sluice.schema.stored import describe

    print(f"{spec.name}: {len(versions)} version(s) stored in {checkpoint}/schemas, version "
          f"{versions[-1].version} in use")
    for line in describe(versions):
        print(line)
    return 0


def cmd_backlog(args: argparse.Namespace, settings: Settings) -> int:
    """What waits for each pipeline (every one in the folder by default): no Spark job, no Airflow."""
    from sluice.operations.backlog import describe, measure
    from sluice.spec.catalog import resolve_upstream

    paths = [resolve_spec_path(name, settings) for name in args.names] or spec_files(settings.pipelines_dir)
    found, bad = [], 0
    for path in paths:
        try:
            spec = resolve_upstream(load_spec(path), settings)
        except SpecError as err:
            bad += 1
            print(f"invalid: {err}", file=sys.stderr)
            continue
        found.append({"pipeline": spec.name, **measure(spec, settings, timeout_seconds=args.timeout)})
    if args.json:
        for backlog in found:
            print(json.dumps(backlog))
    else:
        width = max([len(b["pipeline"]) for b in found] + [8])
        print(f"{'pipeline':<{width}}  {'source':<6}  backlog")
        for backlog in found:
            print(f"{backlog['pipeline']:<{width}}  {backlog['source']:<6}  {describe(backlog)}")
    return 1 if bad else 0
