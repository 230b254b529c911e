"""spark-submit entry point: run one pipeline once and print the run summary.

    spark-submit ... spark_jobs/run_pipeline.py --spec SPEC.yaml [--trigger once] [--dry-run]
                 [--reset-checkpoint] [--run-id ID] [--summary-file PATH]
                 [--max-files-per-trigger N] [--max-offsets-per-trigger N]
                 [--backfill-start ISO --backfill-end ISO]
                 [--airflow-dag-id D --airflow-run-id R --airflow-try-number N]

The JSON run summary is the LAST line of stdout (and is written to --summary-file when given, which is
how the Airflow operator and ``sluice run`` read it back). Exit code 0 = succeeded, 1 = the run failed,
2 = bad arguments or spec.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
import time
from pathlib import Path


def prefer_installed_pyspark(path: list[str] = sys.path) -> None:
    """Import pyspark and py4j from the installed packages, not from the zips spark-submit puts first on
    ``sys.path``, when those zips are the installed pyspark's own copies (the same code): a package imports
    its byte-compiled modules, a zip is compiled from source at every start (~0.4 s of each run)."""
    own = [entry for entry in path if Path(entry).parent.parent.parent.name == "pyspark"
           and Path(entry).parent.parent.name == "python" and Path(entry).suffix == ".zip"
           and (Path(entry).parent.parent.parent.parent / "pyspark" / "__init__.py").is_file()]
    installed = {str(Path(entry).parent.parent.parent.parent) for entry in own}
    if own and any(entry in installed for entry in path):
        path[:] = [entry for entry in path if entry not in own] + own


prefer_installed_pyspark()

from sluice.settings import load_settings  # noqa: E402
from sluice.spec import SpecError, load_spec  # noqa: E402


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="run_pipeline.py", description=__doc__.splitlines()[0])
    parser.add_argument("--spec", required=True, help="pipeline spec (YAML)")
    parser.add_argument("--trigger", choices=["available_now", "once"], help="override the spec's trigger")
    parser.add_argument("--dry-run", action="store_true", help="copy of the checkpoint, scratch sink")
    parser.add_argument("--run-id", default="adhoc", help="recorded in the run summary")
    parser.add_argument("--summary-file", type=Path, help="also write the JSON run summary here")
    parser.add_argument("--reset-checkpoint", action="store_true",
                        help="start a new checkpoint and replace the table's content from the source")
    parser.add_argument("--airflow-dag-id", help="the Airflow ids of the task running this (for the ledger)")
    parser.add_argument("--airflow-run-id")
    parser.add_argument("--airflow-try-number", type=int)
    parser.add_argument("--max-files-per-trigger", type=int, help="override the spec's source.max_files_per_trigger")
    parser.add_argument("--max-offsets-per-trigger", type=int,
                        help="override the spec's source.max_offsets_per_trigger")
    parser.add_argument("--backfill-start", help="rebuild the slice [start, end) (ISO timestamps) of the table")
    parser.add_argument("--backfill-end")
    return parser.parse_args(argv)


def airflow_ids(args: argparse.Namespace) -> dict | None:
    """The ids of the Airflow task that launched this run (for the summary and the ledger), if any."""
    if not args.airflow_dag_id:
        return None
    return {"dag_id": args.airflow_dag_id, "dag_run_id": args.airflow_run_id, "try_number": args.airflow_try_number}


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        spec = load_spec(args.spec)
    except SpecError as err:
        print(f"sluice: invalid spec\n{err}", file=sys.stderr)
        return 2

    # Imported after the spec is valid: a bad spec fails without waiting for a JVM.
    from spark_jobs.runner import RunFailed, RunOptions, run_pipeline
    from spark_jobs.session import get_session

    airflow = airflow_ids(args)
    limits = {"max_files_per_trigger": args.max_files_per_trigger,
              "max_offsets_per_trigger": args.max_offsets_per_trigger}
    limits = {key: value for key, value in limits.items() if value is not None and key in type(spec.source).model_fields}
    if limits:  # a run's own rate limit (the DAG's params, sluice run's options) over the spec's
        spec = spec.model_copy(update={"source": spec.source.model_copy(update=limits)})
    backfill = None
    if args.backfill_start or args.backfill_end:
        from sluice.run_request import BackfillSlice

        backfill = BackfillSlice.from_args(args.backfill_start, args.backfill_end)
    options = RunOptions(trigger=args.trigger or spec.trigger, dry_run=args.dry_run, run_id=args.run_id,
                         reset=args.reset_checkpoint, airflow=airflow, backfill=backfill)
    watch_launcher()
    mark = time.monotonic()
    spark = get_session(app_name=f"sluice-{spec.name}")
    spark.sparkContext.setLogLevel("WARN")
    session_s = round(time.monotonic() - mark, 3)
    code = 0
    try:
        summary = run_pipeline(spark, spec, load_settings(), options)
    except RunFailed as failed:
        summary, code = failed.summary, 1
        print(f"sluice: run of {spec.name} failed: {summary['error']}", file=sys.stderr)
    finally:
        spark.stop()
    # the JVM and SparkSession start, before the run began (not in duration_s)
    summary.setdefault("phases_s", {})["session"] = session_s
    text = json.dumps(summary, default=str)
    if args.summary_file:
        args.summary_file.parent.mkdir(parents=True, exist_ok=True)
        args.summary_file.write_text(text, encoding="utf-8")
    print(text, flush=True)
    return code


def watch_launcher() -> None:
    """End this run when the process that launched it (``sluice run``, the Airflow task) is gone.

    Killing the launcher (kill -9 of the Airflow task, a worker lost) does not kill spark-submit: the run
    would go on writing beside the retry. The launcher passes its pid and start time; if that process
    disappears, this driver kills its JVM (its parent, spark-submit) and itself.
    """
    from sluice.process import LAUNCHER_ENV, launcher_alive

    value = os.environ.get(LAUNCHER_ENV)
    if not value:
        return

    def watch() -> None:
        while launcher_alive(value):
            time.sleep(1)
        print(f"sluice: the launcher of this run ({value}) is gone: stopping the run", file=sys.stderr, flush=True)
        os.kill(os.getppid(), signal.SIGKILL)
        os._exit(137)

    threading.Thread(target=watch, name="sluice-launcher-watch", daemon=True).start()


if __name__ == "__main__":
    sys.exit(main())
