"""spark-submit entry point: run one pipeline once and print the run summary.

    spark-submit ... spark_jobs/run_pipeline.py --spec SPEC.yaml [--trigger once] [--dry-run]
                 [--run-id ID] [--summary-file PATH]

The JSON run summary is the LAST line of stdout (and is written to --summary-file when given, which is
how the Airflow operator and ``sluice run`` read it back). Exit code 0 = succeeded, 1 = the run failed,
2 = bad arguments or spec.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from sluice.settings import load_settings
from sluice.spec import SpecError, load_spec


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="run_pipeline.py", description=__doc__.splitlines()[0])
    parser.add_argument("--spec", required=True, help="pipeline spec (YAML)")
    parser.add_argument("--trigger", choices=["available_now", "once"], help="override the spec's trigger")
    parser.add_argument("--dry-run", action="store_true", help="copy of the checkpoint, scratch sink")
    parser.add_argument("--run-id", default="adhoc", help="recorded in the run summary")
    parser.add_argument("--summary-file", type=Path, help="also write the JSON run summary here")
    return parser.parse_args(argv)


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

    options = RunOptions(trigger=args.trigger or spec.trigger, dry_run=args.dry_run, run_id=args.run_id)
    spark = get_session(app_name=f"sluice-{spec.name}")
    spark.sparkContext.setLogLevel("WARN")
    code = 0
    try:
        summary = run_pipeline(spark, spec, load_settings(), options)
    except RunFailed as failed:
        summary, code = failed.summary, 1
        print(f"sluice: run of {spec.name} failed: {summary['error']}", file=sys.stderr)
    finally:
        spark.stop()
    text = json.dumps(summary, default=str)
    if args.summary_file:
        args.summary_file.parent.mkdir(parents=True, exist_ok=True)
        args.summary_file.write_text(text, encoding="utf-8")
    print(text, flush=True)
    return code


if __name__ == "__main__":
    sys.exit(main())
