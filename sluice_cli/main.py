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
    sluice catalog up|down|status|conf|serve         the catalog of table names; conf [--json]: the Spark
                                                     settings that read the tables by name
    sluice env                                       that environment, as shell exports

SPEC is a spec file, the name of a pipeline in the pipelines folder, or its table's name (bronze.orders).
``sluice run`` streams Spark's progress to stderr and prints the JSON run summary as its last stdout line.
"""

from __future__ import annotations

import argparse
import sys
from importlib.metadata import entry_points

from sluice.settings import load_settings
from sluice.spec import SpecError
from sluice_cli import catalog
from sluice_cli.airflow import cmd_airflow, cmd_env
from sluice_cli.pipelines import (
    cmd_backlog,
    cmd_maintain,
    cmd_run,
    cmd_schema,
    cmd_show,
    cmd_status,
    cmd_validate,
)


def _pipeline_command(sub, name: str, help: str, func) -> argparse.ArgumentParser:
    """A sub-command on one pipeline: its SPEC argument, then the command's own options."""
    p = sub.add_parser(name, help=help)
    p.add_argument("spec", metavar="SPEC", help="spec file or pipeline name")
    p.set_defaults(func=func)
    return p


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="sluice", description="Exactly-once batch-style streaming into Delta.")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("validate", help="check pipeline specs (default: every spec in the pipelines folder), what "
                                        "their next run would refuse (a table another pipeline writes, a sink shared "
                                        "with another spec) and the schema change it would make to its table")
    p.add_argument("specs", nargs="*", metavar="SPEC", help="a spec file or a pipeline name")
    p.set_defaults(func=cmd_validate)

    p = sub.add_parser("run", help="run a pipeline once: the same spark-submit its Airflow task runs")
    p.add_argument("spec", metavar="SPEC", nargs="+",
                   help="spec file or pipeline name; several: one driver runs them in turn (a JVM for all, a "
                        "summary line each)")
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

    p = _pipeline_command(sub, "maintain", "OPTIMIZE and VACUUM a pipeline's tables as its maintenance: section says",
                          cmd_maintain)
    p.add_argument("--dry-run", action="store_true", help="report what VACUUM would delete; change nothing")
    p.add_argument("--wait", type=float, default=600, metavar="SECONDS",
                   help="wait this long for a running run of the pipeline to finish (default 600)")

    p = _pipeline_command(sub, "status", "the pipeline's latest runs, from the run ledger", cmd_status)
    p.add_argument("--limit", type=int, default=10, help="runs to print (default 10)")
    p.add_argument("--json", action="store_true", help="one JSON object per run instead of a table")

    p = _pipeline_command(sub, "schema", "the versions of a source's inferred schema, stored in its checkpoint",
                          cmd_schema)
    p.add_argument("--json", action="store_true", help="the versions as one JSON object")

    p = sub.add_parser("backlog", help="what waits for each pipeline: unseen files, Kafka lag, upstream versions "
                                       "(no Spark, no Airflow)")
    p.add_argument("names", nargs="*", metavar="NAME", help="pipeline names or spec files (default: every spec)")
    p.add_argument("--json", action="store_true", help="one JSON object per pipeline instead of a table")
    p.add_argument("--timeout", type=float, default=10.0, metavar="SECONDS",
                   help="how long to wait for a Kafka broker's answer (default 10)")
    p.set_defaults(func=cmd_backlog)

    p = _pipeline_command(sub, "show", "print a pipeline's Delta table: versions and rows", cmd_show)
    p.add_argument("--limit", type=int, default=20, help="rows to print (default 20)")

    p = sub.add_parser("airflow", help="the airflow CLI with the project's environment", add_help=False)
    p.add_argument("args", nargs=argparse.REMAINDER)
    p.set_defaults(func=cmd_airflow)

    # the local services' commands (sluice kafka, s3, stack): registered by the devservices package
    for command in entry_points(group="sluice.commands"):
        command.load()(sub)

    catalog.add_parser(sub)

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
