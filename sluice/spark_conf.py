"""Spark settings every sluice run gets: Delta wired in, sized for a small machine.

One place for both the spark-submit command (``sluice.launch.submit``) and the test suite's in-process
session (``spark_jobs.driver.session``), so tests run on the same configuration as real runs.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from sluice.settings import Settings

DELTA_CONF: dict[str, str] = {
    # https://docs.delta.io/latest/quick-start.html#set-up-apache-spark-with-delta-lake
    "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
}


def option_text(value: object) -> str:
    """A spec value as Spark wants it in a conf or reader option: YAML booleans become "true"/"false"."""
    return str(value).lower() if isinstance(value, bool) else str(value)


def default_spark_conf() -> dict[str, str]:
    """Delta plus settings sized for ``local[*]`` on a few cores; a spec's ``spark_conf:`` overrides them."""
    cores = os.cpu_count() or 2
    conf = {
        **DELTA_CONF,
        # The default of 200 shuffle partitions means 200 tiny tasks (and 200 state-store folders per
        # stateful operator) for a few MB per micro-batch. Fixed at first run in the checkpoint for
        # stateful queries, so pick it once: https://spark.apache.org/docs/latest/structured-streaming-programming-guide.html#recovery-semantics-after-changes-in-a-streaming-query
        "spark.sql.shuffle.partitions": str(max(2, cores * 2)),
        "spark.default.parallelism": str(max(2, cores * 2)),
        "spark.driver.memory": "2g",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.session.timeZone": "UTC",
        # Delta reads its log with this many tasks; the default (50) is for clusters
        "spark.databricks.delta.snapshotPartitions": "2",
        # Delta's VACUUM lists a table's files with this many tasks: the default of 10,000 made VACUUM of a
        # table of a few files take ~40 s on 2 cores (VacuumCommand: recursiveListDirs(fileListingParallelism))
        "spark.sql.sources.parallelPartitionDiscovery.parallelism": str(max(2, cores * 2)),
    }
    return conf


LOCAL_FILE_SYSTEM = {
    # sluice's files jar: Hadoop's local file system without a chmod or readlink process for each file it
    # creates and each rename (jvm/files/dev/sluice/files/LocalFileSystem.java); set in a local driver's
    # Hadoop configuration once it runs (spark_jobs.driver.session.local_file_system), not on the command
    # line: spark-submit reads its jars with Hadoop's file system before it has loaded them
    "fs.file.impl": "dev.sluice.files.LocalFileSystem",
    "fs.AbstractFileSystem.file.impl": "dev.sluice.files.LocalFs",
}


# --- object storage: Hadoop's S3A file system (s3a://) -------------------------------------------------

def s3a_conf(env: Mapping[str, str], settings: Settings) -> dict[str, str]:
    """Hadoop's S3A settings (as ``spark.hadoop.*``) from the standard AWS variables: the endpoint of an
    S3-compatible store (``AWS_ENDPOINT_URL_S3`` or ``AWS_ENDPOINT_URL``: path-style requests, TLS as its
    scheme says) and the region; S3A's upload buffers in the project's temp folder.

    Credentials are no setting: S3A's default chain reads ``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY``
    from the driver's environment, so no secret goes on a command line, into the Spark UI's environment page
    or into a log."""
    from sluice.storage.object_store import ObjectStore

    conf = {"fs.s3a.buffer.dir": str(settings.var_dir / "tmp" / "s3a"), **ObjectStore.from_env(env).s3a_conf(),
            # a store that does not answer fails the run within about a minute, not after S3A's long retries
            "fs.s3a.attempts.maximum": "3", "fs.s3a.retry.limit": "3", "fs.s3a.connection.timeout": "20s",
            "fs.s3a.connection.establish.timeout": "10s"}
    return {f"spark.hadoop.{key}": value for key, value in conf.items()}


# --- the driver's JVM class archive (built by sluice.launch.jvm_archive) ---------------------------------------

ARCHIVE_NAME = "spark-driver.jsa"


def archive_path(settings: Settings) -> Path:
    return settings.var_dir / "jvm" / ARCHIVE_NAME


C2_HOLD_NAME = "c2-held.json"  # the name jvm/files Compilers looks for
C2_HOLD = '[{match: "*.*", c2: {Exclude: true}}]\n'
"""A compiler directive that keeps every method from HotSpot's optimizing compiler (C2) until it is removed."""


def c2_hold_path(settings: Settings) -> Path:
    """The directive file of ``SLUICE_DRIVER_JIT=auto``, written here when missing or not as it should be."""
    path = settings.var_dir / "jvm" / C2_HOLD_NAME
    if not path.is_file() or path.read_text(encoding="utf-8") != C2_HOLD:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{C2_HOLD_NAME}.{os.getpid()}")
        tmp.write_text(C2_HOLD, encoding="utf-8")
        tmp.replace(path)
    return path


def c2_hold_options(settings: Settings) -> list[str]:
    """The JVM options that start a driver with C2 held back (``SLUICE_DRIVER_JIT=auto``, a run that may be small)."""
    # the JVM says "1 compiler directives added" on stdout: on stderr, a driver's stdout keeps its summary
    return ["-XX:+UnlockDiagnosticVMOptions", f"-XX:CompilerDirectivesFile={c2_hold_path(settings)}",
            "-XX:+DisplayVMOutputToStderr"]


def without_c2_hold(java_options: str) -> str:
    """A driver's JVM options without the C2 hold (:func:`c2_hold_options`)."""
    hold = ("-XX:+UnlockDiagnosticVMOptions", "-XX:+DisplayVMOutputToStderr")
    return " ".join(o for o in java_options.split()
                    if o not in hold and not (o.startswith("-XX:CompilerDirectivesFile=") and o.endswith(C2_HOLD_NAME)))


DRIVER_GC = ["-XX:GCTimeRatio=4"]
"""G1 grows the heap when collections take more than 1/(1 + ratio) of the time: its default ratio of 12 (8%)
grew a small run's heap to 600-700 MB committed with ~150 MB live, more when the run reads an existing table's
Delta state; 4 (20%) keeps a run of 10 files of a table with history within ~50 MB of a fresh pipeline's first
run (peak memory 680-770 MB against 970-1,040), at the same speed (docs/performance.md)."""


def driver_java_options(settings: Settings, *, hold_c2: bool = False) -> list[str]:
    """JVM options of every sluice driver: the archive when there is one; the JIT as ``SLUICE_DRIVER_JIT`` says
    (quick: the first tier only; auto and ``hold_c2``, a run that may be small: C2 held back until the run proves
    large, spark_jobs/driver/jit.py); the heap's growth (:data:`DRIVER_GC`)."""
    options = DRIVER_GC + (["-XX:TieredStopAtLevel=1"] if settings.driver_jit == "quick"
                           else c2_hold_options(settings) if settings.driver_jit == "auto" and hold_c2 else [])
    path = archive_path(settings)
    if not settings.jvm_archive or not path.is_file():
        return options
    return [f"-XX:SharedArchiveFile={path}", "-Xlog:cds=off", "-Xlog:cds+dynamic=off", *options]
