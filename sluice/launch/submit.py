"""One code path from a job request to the spark-submit arguments.

:func:`build_plan` gives a :class:`SubmitPlan` for a :class:`sluice.contract.JobRequest`; the Airflow
operator and ``sluice run`` hand its fields to the provider's ``SparkSubmitHook`` (through
:func:`sluice.launch.launcher.launch`), so both run the very same command, built, masked and logged by the hook.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sluice.contract import JobRequest, Summary
from sluice.process import LAUNCHER_ENV, launcher_token
from sluice.settings import Settings
from sluice.spark_conf import (
    default_spark_conf,
    driver_java_options,
    option_text,
    s3a_conf,
    without_c2_hold,
)
from sluice.spec import PipelineSpec
from sluice.storage.object_store import is_object_store_uri


def spark_jobs_dir() -> Path:
    """Where the Spark job's files are, found without importing PySpark."""
    found = importlib.util.find_spec("spark_jobs")
    if found is None or found.origin is None:
        raise ModuleNotFoundError("the spark_jobs package is not installed: run `make install`")
    return Path(found.origin).parent


APPLICATIONS = {"run": "run_pipeline.py", "maintain": "maintain.py"}
"""The driver's entry point of each kind of job (both are :mod:`spark_jobs.driver.job` with their own body)."""


@dataclass(frozen=True)
class SubmitPlan:
    """Everything spark-submit needs for one job. Field names are SparkSubmitHook's arguments."""

    application: str
    application_args: list[str]
    conf: dict[str, str]
    jars: str
    name: str
    conn_id: str
    env_vars: dict[str, str] = field(default_factory=dict)
    job: JobRequest | None = None
    pipeline: str = ""
    object_store_uris: list[str] = field(default_factory=list)
    """The object store locations the job uses: the launcher checks they answer before it starts anything."""
    places: dict[str, str] = field(default_factory=dict)
    """The job's ``sink``, ``checkpoint``, ``quarantine`` and ``ledger``: what a refusal's summary and ledger row
    name when the launcher refuses the job before its driver starts (:func:`sluice.launch.launcher.launch`)."""
    idle_check: Callable[[], Any] | None = field(default=None, compare=False, repr=False)
    """An incremental run's check, under its lock, that it has nothing to do (:func:`sluice.operations.idle.check`,
    a :class:`~sluice.operations.idle.Verdict`): the launcher then starts no driver. None: the driver runs."""

    @property
    def what(self) -> str:
        """How messages name the job: ``run`` or ``maintenance``."""
        return "maintenance" if self.job is not None and self.job.kind == "maintain" else "run"

    def read_summary(self) -> Summary | None:
        """The summary the Spark job wrote, or None if it wrote none (it died before the end)."""
        if self.job is None or self.job.summary_file is None:
            return None
        return Summary.read(self.job.summary_file)

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


def application(kind: str) -> str:
    return str(spark_jobs_dir() / APPLICATIONS[kind])


def holds_c2(job: JobRequest, spec: PipelineSpec, settings: Settings) -> bool:
    """Whether the job's driver starts with C2 held back (``SLUICE_DRIVER_JIT=auto``): an incremental run (or its
    dry run) of a pipeline that ran before, whose new data is most often small and is weighed before its first
    batch (spark_jobs/driver/jit.py). A first run, which reads all that waits, a reset, a backfill and maintenance
    start with C2."""
    if settings.driver_jit != "auto" or job.kind != "run" or job.run is None or job.run.mode not in (
            "incremental", "dry_run"):
        return False
    from sluice.storage.checkpoint import Checkpoint

    try:
        return Checkpoint(spec.checkpoint_path(settings)).has_progress()
    except Exception:  # noqa: BLE001 - a store that does not answer now: the run says so itself, with C2
        return False


def build_plan(job: JobRequest, spec: PipelineSpec, settings: Settings, *, workdir: Path,
               secret_env: dict[str, str] | None = None, hold_c2: bool | None = None) -> SubmitPlan:
    """The spark-submit of one job: its request written to ``workdir/request.json`` (the driver's only
    argument), its summary to come in ``workdir/summary.json``. ``secret_env`` (e.g. Kafka credentials from an
    Airflow connection) goes into the process environment only: the hook neither logs it nor puts it in the
    command, and the request file never holds it. ``hold_c2``: the driver starts with C2 held back (None: as
    :func:`holds_c2` says)."""
    if hold_c2 is None:
        hold_c2 = holds_c2(job, spec, settings)
    job = job.model_copy(update={"spec_path": str(Path(job.spec_path).resolve()),
                                 "summary_file": str(Path(workdir) / "summary.json")})
    request_file = job.write(Path(workdir) / "request.json")
    stores = object_store_uris(spec, settings)
    on_store = bool(stores)
    if job.kind == "maintain":
        name = f"sluice-maintain-{spec.name}{'-dry-run' if job.dry_run else ''}"
    else:
        name = f"sluice-{spec.name}{'-backfill' if job.backfill else ''}{'-dry-run' if job.dry_run else ''}"
    return SubmitPlan(
        application=application(job.kind),
        application_args=["--request", str(request_file)],
        conf={**_conf(spec, settings, hold_c2=hold_c2), **(s3a_conf(os.environ, settings) if on_store else {})},
        jars=",".join(str(j) for j in [*settings.spark_jars(), *(settings.object_store_jars() if on_store else [])]),
        name=name,
        conn_id=settings.spark_conn_id,
        # the driver stops itself if this process (the launcher) is killed: no orphan writer
        env_vars={**spark_env(settings), LAUNCHER_ENV: launcher_token(), **(secret_env or {})},
        job=job,
        pipeline=spec.name,
        object_store_uris=stores,
        places={"sink": spec.sink_path(settings), "checkpoint": spec.checkpoint_path(settings),
                "quarantine": spec.quarantine_table_path(settings), "ledger": str(settings.ledger_path),
                "spool": str(settings.ledger_spool)},
        idle_check=idle_check(job, spec, settings),
    )


def idle_check(job: JobRequest, spec: PipelineSpec, settings: Settings) -> Callable[[], Any] | None:
    """The idle check of an incremental run (``SLUICE_IDLE_RUNS=skip``); None for any other job."""
    if settings.idle_runs != "skip" or job.kind != "run" or job.mode != "incremental":
        return None
    from sluice.operations import idle

    return functools.partial(idle.check, job, spec, settings)


def object_store_uris(spec: PipelineSpec, settings: Settings) -> list[str]:
    """The object store locations a job reads or writes (its driver then gets Hadoop's S3A jars and
    settings); empty when everything is on local disk."""
    places = [spec.sink_path(settings), spec.checkpoint_path(settings), spec.quarantine_table_path(settings),
              str(settings.checkpoint_root), str(settings.ledger_path)]
    if getattr(spec.source, "path", None):
        places.append(spec.source_path(settings))
    return sorted({p for p in places if is_object_store_uri(p)})


def _conf(spec: PipelineSpec, settings: Settings, *, hold_c2: bool = False) -> dict[str, str]:
    """sluice's Spark settings, the driver's JVM options (log4j, class archive, JIT), the deployment's
    (``SLUICE_SPARK_CONF``), then the spec's own."""
    return {
        **default_spark_conf(),
        "spark.driver.extraJavaOptions": " ".join(
            [f"-Dlog4j2.configurationFile=file:{spark_jobs_dir() / 'log4j2.properties'}",
             *driver_java_options(settings, hold_c2=hold_c2)]),
        **settings.spark_conf,
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
        **({"SLUICE_LEDGER_SPOOL": str(settings.ledger_spool_dir)} if settings.ledger_spool_dir else {}),
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


class GroupRefused(ValueError):
    """Jobs that cannot share one driver (their Spark settings differ): the message says which, and what to do."""


def _without_c2_hold(conf: dict[str, str]) -> dict[str, str]:
    options = conf.get("spark.driver.extraJavaOptions")
    return conf if options is None else {**conf, "spark.driver.extraJavaOptions": without_c2_hold(options)}


def group_plan(plans: list[SubmitPlan]) -> SubmitPlan:
    """One spark-submit for several jobs of the same kind: one driver runs them in turn
    (:func:`spark_jobs.driver.job.main` with a ``--request`` each). Their Spark settings, jars and connection
    must be the same (a session has one set); their environments are merged (a Kafka secret of each)."""
    first = plans[0]
    unheld = [_without_c2_hold(plan.conf) for plan in plans]
    every_held = all(c != plan.conf for c, plan in zip(unheld, plans, strict=True))
    conf = first.conf if every_held else unheld[0]  # C2 held back for the group only if for each of its jobs
    for plan, theirs_conf in zip(plans[1:], unheld[1:], strict=True):
        if plan.application != first.application:
            raise GroupRefused(f"{first.pipeline} and {plan.pipeline} are jobs of different kinds: run them apart")
        for what, mine, theirs in (("Spark settings", unheld[0], theirs_conf), ("jars", first.jars, plan.jars),
                                   ("Spark connection", first.conn_id, plan.conn_id)):
            if mine != theirs:
                differ = sorted(k for k in {*mine, *theirs} if mine.get(k) != theirs.get(k)) \
                    if isinstance(mine, dict) else [what]
                raise GroupRefused(
                    f"{first.pipeline} and {plan.pipeline} cannot share a driver: their {what} differ "
                    f"({', '.join(differ[:5])}); run them apart, or give them the same spark_conf")
    env: dict[str, str] = {}
    for plan in plans:
        for key, value in plan.env_vars.items():
            if key in env and env[key] != value:
                raise GroupRefused(f"{plan.pipeline} needs {key} set otherwise than another pipeline of the group: "
                                   "run it apart")
            env[key] = value
    args = [arg for plan in plans for arg in plan.application_args]
    return SubmitPlan(
        application=first.application, application_args=args, conf=conf, jars=first.jars,
        name=f"{first.name}-and-{len(plans) - 1}-more", conn_id=first.conn_id, env_vars=env, job=None,
        pipeline=", ".join(plan.pipeline for plan in plans),
        object_store_uris=sorted({uri for plan in plans for uri in plan.object_store_uris}),
    )
