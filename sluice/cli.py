"""The ``sluice`` command line.

    sluice validate SPEC...                          check specs (exit 1 on any invalid one), and show the
                                                     schema change the next run would make to the table
    sluice run SPEC [--trigger T] [--dry-run] [--reset-checkpoint]
                    [--max-files-per-trigger N | --max-offsets-per-trigger N]
                    [--backfill-from DAY --backfill-to DAY]
                                                     run a pipeline once, as its Airflow task does
    sluice show SPEC [--limit N]                     the pipeline's Delta table: history and rows
    sluice status SPEC [--limit N] [--json]          the pipeline's latest runs, from the run ledger
    sluice schema SPEC [--json]                      the versions of the source's stored (inferred) schema
    sluice airflow ARGS...                           the airflow CLI with the project's environment
    sluice kafka up|down|status|create-topic T       the project's local Kafka broker
    sluice s3 up|down|status|env|create-bucket B     the project's local S3 server (SeaweedFS)
    sluice env                                       that environment, as shell exports

SPEC is a spec file, or the name of a pipeline in the pipelines folder. ``sluice run`` streams Spark's
progress to stderr and prints the JSON run summary as its last stdout line.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import shlex
import sys
import tempfile
from datetime import datetime, timezone
from pathlib import Path

from sluice.catalog import PipelineCatalog, spec_files
from sluice.environment import project_env
from sluice.quality import quality_warnings
from sluice.schema_change import next_change
from sluice.settings import Settings, load_settings
from sluice.spec import KafkaSource, SpecError, load_spec


def resolve_spec_path(arg: str, settings: Settings) -> Path:
    """A spec file path, or a pipeline name looked up in the pipelines folder."""
    return PipelineCatalog(settings.pipelines_dir).resolve(arg)


def _apply_env(settings: Settings) -> None:
    settings.airflow_home.mkdir(parents=True, exist_ok=True)
    os.environ.update(project_env(settings))


def cmd_validate(args: argparse.Namespace, settings: Settings) -> int:
    """Each spec (a file or a pipeline name; every spec of the folder by default), and what its next run would
    refuse that is knowable without a JVM: a table another pipeline writes, a sink shared with another spec of
    the folder, a schema change the table cannot take."""
    from sluice.catalog import sink_conflict, sinks_of

    sinks = sinks_of(settings.pipelines_dir, settings)
    bad = 0
    for arg in args.specs or [str(p) for p in spec_files(settings.pipelines_dir)]:
        try:
            path = resolve_spec_path(arg, settings)
            spec = load_spec(path)
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
    spec_path = resolve_spec_path(args.spec, settings)
    spec = load_spec(spec_path)
    for warning in spec.warnings():
        print(f"warning: {spec_path}: {warning}", file=sys.stderr)
    from sluice.run_request import CLI_NAMES, RunRequestError, run_request

    if args.reset_checkpoint and (args.backfill_from or args.backfill_to):
        print("sluice: --reset-checkpoint and --backfill-from/--backfill-to: choose one; a reset rebuilds the "
              "whole table from the source, a backfill some days of it", file=sys.stderr)
        return 2
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
    _apply_env(settings)

    from sluice_airflow.kafka_connection import kafka_secret_env

    from sluice.contract import JobRequest
    from sluice.launcher import lock_for

    run_id = "cli__" + datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S") + f"_{os.getpid()}"
    job = JobRequest(spec_path=str(spec_path), run_id=run_id, run=request)
    # a real run holds the pipeline's lock from before spark-submit to its end: a second run is refused at once
    lock = lock_for(job, spec.name, settings)
    # kafka_secret_env reads Airflow only for a spec that names a Kafka connection
    return _launch(job, spec, settings, lock, secret_env=kafka_secret_env(spec),
                   airflow_free=not getattr(spec.source, "connection", None))


def cmd_maintain(args: argparse.Namespace, settings: Settings) -> int:
    spec_path = resolve_spec_path(args.spec, settings)
    spec = load_spec(spec_path)
    if args.wait < 0:
        print(f"sluice: --wait {args.wait}: give the seconds to wait for a running run (0: refuse at once)",
              file=sys.stderr)
        return 2
    _apply_env(settings)
    from sluice.contract import maintain_job
    from sluice.launcher import lock_for

    run_id = "cli_maintain__" + datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S") + f"_{os.getpid()}"
    job = maintain_job(spec_path=str(spec_path), run_id=run_id, dry_run=args.dry_run)
    lock = lock_for(job, spec.name, settings, wait_seconds=args.wait)
    return _launch(job, spec, settings, lock)


def _launch(job, spec, settings: Settings, lock, *, secret_env=None, airflow_free: bool = True) -> int:
    """Launch the job (:func:`sluice.launcher.launch`); print its summary as the last stdout line. Exit 0 if
    it succeeded, else 1 (the summary, when the driver wrote one, is printed all the same)."""
    from sluice.launcher import JobFailed, launch, subprocess_submit
    from sluice.submit import build_plan, env_spark_master

    # Without an Airflow connection to read (the Spark master defined in the environment, as the project
    # does; no Kafka connection named in the spec), the command is built here and Airflow is not imported.
    master = env_spark_master(settings.spark_conn_id) if airflow_free else None
    if master is None:
        from sluice_airflow.spark_connection import require_spark_connection

        require_spark_connection(settings.spark_conn_id)
    submit = subprocess_submit(master) if master is not None else _airflow_submit
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


def _airflow_submit(plan) -> None:
    """The plan's spark-submit through Airflow's hook: connections from Airflow's database or secrets."""
    from sluice_airflow.hook import SluiceSubmitHook

    from sluice.launcher import stdout_to_stderr

    # after Airflow's import, which configures logging its own way: the hook's lines go to stderr
    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stderr, force=True)
    with stdout_to_stderr():
        SluiceSubmitHook(**plan.hook_kwargs()).submit(plan.application)


def cmd_show(args: argparse.Namespace, settings: Settings) -> int:
    spec = load_spec(resolve_spec_path(args.spec, settings))
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from spark_jobs.show import show_table

    show_table(spec, settings, limit=args.limit)
    return 0


def cmd_status(args: argparse.Namespace, settings: Settings) -> int:
    spec = load_spec(resolve_spec_path(args.spec, settings))
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from sluice.status import show_status

    return show_status(spec, settings, limit=args.limit, as_json=args.json)


def cmd_schema(args: argparse.Namespace, settings: Settings) -> int:
    """The versions of an inferred source schema, stored in the checkpoint (no Spark, no Airflow)."""
    from sluice.schemas import history, infers_schema

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
    from sluice.schemas import describe

    print(f"{spec.name}: {len(versions)} version(s) stored in {checkpoint}/schemas, version "
          f"{versions[-1].version} in use")
    for line in describe(versions):
        print(line)
    return 0


def cmd_backlog(args: argparse.Namespace, settings: Settings) -> int:
    """What waits for each pipeline (every one in the folder by default): no Spark job, no Airflow."""
    from sluice.backlog import describe, measure
    from sluice.catalog import resolve_upstream

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


def cmd_airflow(args: argparse.Namespace, settings: Settings) -> int:
    _apply_env(settings)
    airflow = str(Path(sys.executable).parent / "airflow")
    sqlite = "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN" not in os.environ
    if sqlite and not (settings.airflow_home / "airflow.db").exists() and args.args[:1] != ["db"]:
        # first use: the SQLite metadata DB of the demo set-up
        import subprocess

        subprocess.run([airflow, "db", "migrate"], check=True, stdout=subprocess.DEVNULL)
    if args.args[:1] == ["standalone"]:
        return _supervise([airflow, *args.args])
    os.execv(airflow, [airflow, *args.args])


def _supervise(command: list[str], grace_seconds: float = 30.0) -> int:
    """Run ``command`` (``airflow standalone``) as a child and stop everything it started when this process is
    told to stop: SIGTERM, SIGINT or SIGHUP is passed on to the child's whole tree, which gets ``grace_seconds``
    to end before what is left is killed. (``airflow standalone`` stopped with SIGTERM leaves its scheduler, API
    server, triggerer, DAG processor and workers running: a wrapper must stop what it started.) The handler only
    takes note; the loop below does the work (a handler that waited on the child would wait on itself)."""
    import signal
    import subprocess
    import time

    from sluice.process import alive, kill_tree

    child = subprocess.Popen(command, start_new_session=True)
    stop: dict[str, object] = {}

    def note(signum, _frame):
        stop.setdefault("signal", signum)

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, note)
    tree: list[int] = []
    while True:
        code = child.poll()
        if "signal" in stop and "deadline" not in stop:
            tree = kill_tree(child.pid, signal.SIGTERM)
            stop["deadline"] = time.monotonic() + grace_seconds
        if "deadline" in stop:
            left = [pid for pid in tree if pid != child.pid and alive(pid)]
            if code is not None and not left:
                return 128 + int(stop["signal"])
            if time.monotonic() > stop["deadline"]:
                for pid in left:  # re-parented when the child ended: no longer under it
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGKILL)
                if code is None:
                    kill_tree(child.pid, signal.SIGKILL)
                child.wait()
                return 128 + int(stop["signal"])
        elif code is not None:
            return code
        time.sleep(0.2)


def cmd_kafka(args: argparse.Namespace, settings: Settings) -> int:
    """The project's local Kafka broker (KRaft, 127.0.0.1:SLUICE_KAFKA_PORT), data in var/kafka."""
    from sluice.kafka_broker import Broker, create_topic, start_broker, stop_broker

    broker = Broker.load(settings.kafka_home)
    if args.action == "up":
        if broker and broker.running():
            print(f"kafka: already running at {broker.bootstrap_servers} (pid {broker.pid})")
            return 0
        broker = start_broker(settings.kafka_home, settings.jars_dir, port=settings.kafka_port)
        print(f"kafka: running at {broker.bootstrap_servers} (pid {broker.pid}, data in {settings.kafka_home})")
    elif args.action == "down":
        if broker and broker.running():
            stop_broker(broker)
            print("kafka: stopped")
        else:
            print("kafka: not running")
    elif args.action == "status":
        running = bool(broker and broker.running())
        print(f"kafka: running at {broker.bootstrap_servers} (pid {broker.pid})" if running else "kafka: not running")
        return 0 if running else 1
    elif args.action == "create-topic":
        if not (broker and broker.running()):
            raise RuntimeError("the local Kafka broker is not running: start it with `make kafka-up`")
        created = create_topic(broker.bootstrap_servers, args.topic, args.partitions)
        print(f"kafka: topic {args.topic} {'created' if created else 'exists'} ({args.partitions} partitions)")
    return 0


def cmd_s3(args: argparse.Namespace, settings: Settings) -> int:
    """The project's local S3-compatible object store (SeaweedFS, 127.0.0.1:SLUICE_S3_PORT), data in var/s3."""
    from sluice.object_store import ObjectStore
    from sluice.s3_server import S3Server, create_bucket, start_server, stop_server

    server = S3Server.load(settings.s3_home)
    running = bool(server and server.running())
    if args.action == "up":
        if running:
            print(f"s3: already running at {server.endpoint} (pid {server.pid})")
            return 0
        server = start_server(settings.s3_home, settings.var_dir, port=settings.s3_port)
        print(f"s3: running at {server.endpoint} (pid {server.pid}, data in {settings.s3_home}); "
              "its credentials: eval \"$(sluice s3 env)\"")
    elif args.action == "down":
        if running:
            stop_server(server)
            print("s3: stopped")
        else:
            print("s3: not running")
    elif args.action == "status":
        print(f"s3: running at {server.endpoint} (pid {server.pid})" if running else "s3: not running")
        return 0 if running else 1
    elif args.action == "env":
        if not running:
            raise RuntimeError("the local S3 server is not running: start it with `make s3-up`")
        for key, value in server.env().items():
            print(f"export {key}={shlex.quote(value)}")
    elif args.action == "create-bucket":
        if not args.bucket:
            raise RuntimeError("sluice s3 create-bucket BUCKET: name the bucket")
        if running:
            created = create_bucket(server, args.bucket)
        elif ObjectStore.from_env().configured:  # another store, as the AWS variables name it (docker-compose)
            created = ObjectStore.from_env().create_bucket(args.bucket)
        else:
            raise RuntimeError("the local S3 server is not running: start it with `make s3-up` (or set "
                               "AWS_ENDPOINT_URL and the credentials to create the bucket in another store)")
        print(f"s3: bucket {args.bucket} {'created' if created else 'exists'}")
    return 0


def cmd_stack(args: argparse.Namespace, settings: Settings) -> int:
    """The docker-compose topology as local processes (PostgreSQL, Airflow, Spark standalone, Kafka, S3)."""
    from sluice.stack import Stack, StackError

    stack = Stack(settings)
    if args.action == "up":
        try:
            stack.up()
        except StackError as err:
            print(f"sluice stack: {err}", file=sys.stderr)
            return 1
        env = stack.env
        print(f"stack: up. Airflow http://127.0.0.1:{env['AIRFLOW__API__PORT']} (admin / admin), Spark master "
              f"{env['SLUICE_SPARK_MASTER']} (UI http://127.0.0.1:{stack.ports.spark_master_ui}), Kafka "
              f"127.0.0.1:{settings.kafka_port}, PostgreSQL 127.0.0.1:{stack.ports.postgres}, object store "
              f"{env['AWS_ENDPOINT_URL']} (lake {env['SLUICE_LAKE_ROOT']}); logs in {stack.logs}")
        print("stack: talk to it with  eval \"$(.venv/bin/sluice stack env)\"; stop it with  make stack-down")
    elif args.action == "down":
        stopped = stack.down()
        print(f"stack: stopped {', '.join(stopped) if stopped else 'nothing (not running)'}")
    elif args.action == "status":
        status = stack.status()
        for name, up in status.items():
            print(f"{name:24} {'running' if up else 'stopped'}")
        return 0 if all(status.values()) else 1
    elif args.action == "env":
        for key in sorted(k for k in stack.env if k.startswith(("AIRFLOW", "SLUICE", "SPARK", "PYSPARK", "AWS_"))):
            print(f"export {key}={shlex.quote(stack.env[key])}")
    return 0


def cmd_env(args: argparse.Namespace, settings: Settings) -> int:
    for key, value in sorted(project_env(settings).items()):
        print(f"export {key}={shlex.quote(value)}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="sluice", description="Exactly-once batch-style streaming into Delta.")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("validate", help="check pipeline specs (default: every spec in the pipelines folder), what "
                                        "their next run would refuse (a table another pipeline writes, a sink shared "
                                        "with another spec) and the schema change it would make to its table")
    p.add_argument("specs", nargs="*", metavar="SPEC", help="a spec file or a pipeline name")
    p.set_defaults(func=cmd_validate)

    p = sub.add_parser("run", help="run a pipeline once: the same spark-submit its Airflow task runs")
    p.add_argument("spec", metavar="SPEC", help="spec file or pipeline name")
    p.add_argument("--trigger", choices=["available_now", "once"], help="override the spec's trigger")
    p.add_argument("--dry-run", action="store_true",
                   help="report what the next run would ingest; the checkpoint and table are not touched")
    p.add_argument("--reset-checkpoint", action="store_true",
                   help="start a new checkpoint (the old one is kept beside it) and REPLACE the table's content "
                        "with everything the source holds")
    p.add_argument("--max-files-per-trigger", metavar="N", help="file sources: at most N files per micro-batch")
    p.add_argument("--max-offsets-per-trigger", metavar="N", help="Kafka: at most N records per micro-batch")
    p.add_argument("--backfill-from", metavar="DAY",
                   help="backfill: rebuild the days DAY..--backfill-to (YYYY-MM-DD, inclusive) of the table from "
                        "what the stream ingested for them; the checkpoint is not touched")
    p.add_argument("--backfill-to", metavar="DAY")
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("maintain", help="OPTIMIZE and VACUUM a pipeline's tables as its maintenance: section says")
    p.add_argument("spec", metavar="SPEC", help="spec file or pipeline name")
    p.add_argument("--dry-run", action="store_true", help="report what VACUUM would delete; change nothing")
    p.add_argument("--wait", type=float, default=600, metavar="SECONDS",
                   help="wait this long for a running run of the pipeline to finish (default 600)")
    p.set_defaults(func=cmd_maintain)

    p = sub.add_parser("status", help="the pipeline's latest runs, from the run ledger")
    p.add_argument("spec", metavar="SPEC", help="spec file or pipeline name")
    p.add_argument("--limit", type=int, default=10, help="runs to print (default 10)")
    p.add_argument("--json", action="store_true", help="one JSON object per run instead of a table")
    p.set_defaults(func=cmd_status)

    p = sub.add_parser("schema", help="the versions of a source's inferred schema, stored in its checkpoint")
    p.add_argument("spec", metavar="SPEC", help="spec file or pipeline name")
    p.add_argument("--json", action="store_true", help="the versions as one JSON object")
    p.set_defaults(func=cmd_schema)

    p = sub.add_parser("backlog", help="what waits for each pipeline: unseen files, Kafka lag, upstream versions "
                                       "(no Spark, no Airflow)")
    p.add_argument("names", nargs="*", metavar="NAME", help="pipeline names or spec files (default: every spec)")
    p.add_argument("--json", action="store_true", help="one JSON object per pipeline instead of a table")
    p.add_argument("--timeout", type=float, default=10.0, metavar="SECONDS",
                   help="how long to wait for a Kafka broker's answer (default 10)")
    p.set_defaults(func=cmd_backlog)

    p = sub.add_parser("show", help="print a pipeline's Delta table: versions and rows")
    p.add_argument("spec", metavar="SPEC", help="spec file or pipeline name")
    p.add_argument("--limit", type=int, default=20, help="rows to print (default 20)")
    p.set_defaults(func=cmd_show)

    p = sub.add_parser("airflow", help="the airflow CLI with the project's environment", add_help=False)
    p.add_argument("args", nargs=argparse.REMAINDER)
    p.set_defaults(func=cmd_airflow)

    p = sub.add_parser("kafka", help="the project's local Kafka broker: up, down, status, create-topic")
    p.add_argument("action", choices=["up", "down", "status", "create-topic"])
    p.add_argument("topic", nargs="?", help="with create-topic: the topic's name")
    p.add_argument("--partitions", type=int, default=3, help="with create-topic (default 3)")
    p.set_defaults(func=cmd_kafka)

    p = sub.add_parser("s3", help="the project's local S3 server (SeaweedFS): up, down, status, env, create-bucket")
    p.add_argument("action", choices=["up", "down", "status", "env", "create-bucket"])
    p.add_argument("bucket", nargs="?", help="with create-bucket: the bucket's name")
    p.set_defaults(func=cmd_s3)

    p = sub.add_parser("stack", help="the team topology as local processes: up, down, status, env")
    p.add_argument("action", choices=["up", "down", "status", "env"])
    p.set_defaults(func=cmd_stack)

    p = sub.add_parser("env", help="print the project's environment as shell exports")
    p.set_defaults(func=cmd_env)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    try:
        settings = load_settings()
    except ValueError as err:  # a SLUICE_* variable that is no valid value: named, with its fix
        print(f"sluice: {err}", file=sys.stderr)
        return 2
    if argv[:1] == ["airflow"]:  # everything after it is airflow's, --help included
        return cmd_airflow(argparse.Namespace(args=argv[1:]), settings)
    args = build_parser().parse_args(argv)
    try:
        return args.func(args, settings)
    except SpecError as err:
        print(f"sluice: invalid spec\n{err}", file=sys.stderr)
        return 1
    except (FileNotFoundError, RuntimeError) as err:
        print(f"sluice: {err}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
