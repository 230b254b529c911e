"""One code path from a spec to the spark-submit arguments.

:func:`build_submit_plan` gives a :class:`SubmitPlan`; the Airflow operator hands its fields to
``SparkSubmitOperator`` and ``sluice run`` hands the same fields to ``SparkSubmitHook``, so both run
the very same command, built, masked and logged by the provider's hook.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sluice.jvm_archive import driver_java_options
from sluice.process import LAUNCHER_ENV, launcher_token
from sluice.run_request import RunRequest
from sluice.settings import Settings
from sluice.spark_conf import default_spark_conf, option_text
from sluice.spec import PipelineSpec, Trigger

# Kafka client settings from an Airflow connection (SASL/SSL secrets included), base64 JSON, for the driver
KAFKA_SECRET_ENV = "SLUICE_KAFKA_SECRET_CONFIG"


def spark_jobs_dir() -> Path:
    """Where the Spark job's files are, found without importing PySpark."""
    found = importlib.util.find_spec("spark_jobs")
    if found is None or found.origin is None:
        raise ModuleNotFoundError("the spark_jobs package is not installed: run `make install`")
    return Path(found.origin).parent


@dataclass(frozen=True)
class SubmitPlan:
    """Everything spark-submit needs for one run. Field names are SparkSubmitHook's arguments."""

    application: str
    application_args: list[str]
    conf: dict[str, str]
    jars: str
    name: str
    conn_id: str
    env_vars: dict[str, str] = field(default_factory=dict)
    summary_file: Path | None = None

    def read_summary(self) -> dict[str, Any] | None:
        """The run summary the Spark job wrote, or None if it wrote none (it died before the end)."""
        if self.summary_file is None or not self.summary_file.is_file():
            return None
        return json.loads(self.summary_file.read_text(encoding="utf-8"))

    def hook_kwargs(self) -> dict[str, Any]:
        """Arguments for ``SparkSubmitHook`` (the application goes to ``submit()``)."""
        return {
            "conf": self.conf,
            "conn_id": self.conn_id,
            "jars": self.jars,
            "name": self.name,
            "application_args": self.application_args,
            "env_vars": self.env_vars,
        }


def build_submit_plan(
    spec_path: str | Path,
    spec: PipelineSpec,
    settings: Settings,
    *,
    trigger: Trigger | None = None,
    dry_run: bool = False,
    reset: bool = False,
    run_id: str,
    summary_file: Path,
    secret_env: dict[str, str] | None = None,
    airflow: dict[str, Any] | None = None,
    request: RunRequest | None = None,
) -> SubmitPlan:
    """The spark-submit arguments of one run. ``secret_env`` (e.g. Kafka credentials from an Airflow
    connection) goes into the process environment only: the hook neither logs it nor puts it in the command.
    ``request`` (validated by :func:`sluice.run_request.run_request`): the run's own rate limits and backfill
    slice."""
    jobs = spark_jobs_dir()
    args = ["--spec", str(Path(spec_path).resolve()), "--trigger", trigger or spec.trigger, "--run-id", run_id]
    if dry_run:
        args.append("--dry-run")
    if reset:
        args.append("--reset-checkpoint")
    if request is not None:
        if request.max_files_per_trigger:
            args += ["--max-files-per-trigger", str(request.max_files_per_trigger)]
        if request.max_offsets_per_trigger:
            args += ["--max-offsets-per-trigger", str(request.max_offsets_per_trigger)]
        if request.backfill is not None:
            args += request.backfill.args()
    if airflow:
        args += ["--airflow-dag-id", str(airflow["dag_id"]), "--airflow-run-id", str(airflow["dag_run_id"]),
                 "--airflow-try-number", str(airflow["try_number"])]
    args += ["--summary-file", str(summary_file)]
    return SubmitPlan(
        application=str(jobs / "run_pipeline.py"),
        application_args=args,
        conf=_conf(spec, settings),
        jars=",".join(str(j) for j in settings.spark_jars()),
        name=f"sluice-{spec.name}{'-backfill' if request and request.backfill else ''}{'-dry-run' if dry_run else ''}",
        conn_id=settings.spark_conn_id,
        # the driver stops itself if this process (the launcher) is killed: no orphan writer
        env_vars={**spark_env(settings), LAUNCHER_ENV: launcher_token(), **(secret_env or {})},
        summary_file=summary_file,
    )


def build_maintenance_plan(
    spec_path: str | Path, spec: PipelineSpec, settings: Settings, *, dry_run: bool = False, run_id: str,
    summary_file: Path, airflow: dict[str, Any] | None = None,
) -> SubmitPlan:
    """The spark-submit arguments of a maintenance run (``spark_jobs/maintain.py``: OPTIMIZE, VACUUM)."""
    args = ["--spec", str(Path(spec_path).resolve()), "--run-id", run_id]
    if dry_run:
        args.append("--dry-run")
    if airflow:
        args += ["--airflow-dag-id", str(airflow["dag_id"]), "--airflow-run-id", str(airflow["dag_run_id"]),
                 "--airflow-try-number", str(airflow["try_number"])]
    args += ["--summary-file", str(summary_file)]
    return SubmitPlan(
        application=str(spark_jobs_dir() / "maintain.py"),
        application_args=args,
        conf=_conf(spec, settings),
        jars=",".join(str(j) for j in settings.spark_jars()),
        name=f"sluice-maintain-{spec.name}{'-dry-run' if dry_run else ''}",
        conn_id=settings.spark_conn_id,
        env_vars={**spark_env(settings), LAUNCHER_ENV: launcher_token()},
        summary_file=summary_file,
    )


def _conf(spec: PipelineSpec, settings: Settings) -> dict[str, str]:
    """sluice's Spark settings, the driver's JVM options (log4j, class archive), then the spec's own."""
    return {
        **default_spark_conf(),
        "spark.driver.extraJavaOptions": " ".join(
            [f"-Dlog4j2.configurationFile=file:{spark_jobs_dir() / 'log4j2.properties'}",
             *driver_java_options(settings)]),
        **{k: option_text(v) for k, v in spec.spark_conf.items()},
    }


def spark_env(settings: Settings) -> dict[str, str]:
    """Environment of the spark-submit process: the driver resolves paths exactly as we did."""
    python = os.environ.get("PYSPARK_PYTHON") or sys.executable
    return {
        "SLUICE_HOME": str(settings.home),
        "SLUICE_PIPELINES": str(settings.pipelines_dir),
        "SLUICE_LAKE_ROOT": str(settings.lake_root),
        "SLUICE_CHECKPOINT_ROOT": str(settings.checkpoint_root),
        "SLUICE_LEDGER": str(settings.ledger_path),
        "SLUICE_JARS": str(settings.jars_dir),
        "PYSPARK_PYTHON": python,
        "PYSPARK_DRIVER_PYTHON": python,
        "SPARK_LOCAL_IP": os.environ.get("SPARK_LOCAL_IP", "127.0.0.1"),
    }


def env_spark_master(conn_id: str, environ: dict[str, str] | None = None) -> str | None:
    """The master of the Spark connection ``conn_id`` when an ``AIRFLOW_CONN_<ID>`` variable defines it
    simply (JSON ``{"conn_type": "spark", "host": ..., "port": ...}`` without extras, or a ``spark://host:port``
    URI), resolved the way SparkSubmitHook resolves it. None when only Airflow can tell (a connection in its
    database or secrets backend, extras that change the command): then ask Airflow.

    Airflow looks at environment variables before its database, so where this answers, the hook would
    answer the same; ``sluice run`` then skips importing Airflow (about 6 s).
    """
    env = os.environ if environ is None else environ
    value = (env.get(f"AIRFLOW_CONN_{conn_id.upper()}") or "").strip()
    if not value:
        return None
    if value.startswith("{"):
        try:
            conn = json.loads(value)
        except json.JSONDecodeError:
            return None
        if not isinstance(conn, dict) or conn.get("extra") or set(conn) - {"conn_type", "host", "port", "description"}:
            return None
        conn_type, host, port = conn.get("conn_type"), conn.get("host"), conn.get("port")
    else:
        from urllib.parse import urlsplit

        parts = urlsplit(value)
        if parts.scheme != "spark" or parts.query or parts.path.strip("/") or parts.username:
            return None
        conn_type, host, port = "spark", parts.hostname, parts.port
    if conn_type != "spark" or not host:
        return None
    master = host if ("://" in host or not port) else f"{conn_type}://{host}"
    return f"{master}:{port}" if port else master


def spark_submit_command(plan: SubmitPlan, master: str) -> list[str]:
    """The command SparkSubmitHook builds for ``plan`` on a connection with this master (a test holds the
    two equal)."""
    cmd = ["spark-submit", "--master", master]
    for key, value in plan.conf.items():
        cmd += ["--conf", f"{key}={value}"]
    if plan.jars:
        cmd += ["--jars", plan.jars]
    if plan.name:
        cmd += ["--name", plan.name]
    return [*cmd, plan.application, *plan.application_args]
