"""spark-submit entry point run once at set-up (``make jvm-archive``): exercise what a sluice run loads.

Runs the real code path (run_pipeline) on a few rows in a scratch folder: JSON files -> Delta append
(a partitioned table, a data run then a run that finds nothing), CSV -> Delta MERGE, and a dry run. The
JVM it runs in was started with ``-XX:ArchiveClassesAtExit``: the classes it loaded are written to a class
data archive that every later run's driver maps at start (``-XX:SharedArchiveFile``), instead of finding,
reading and verifying thousands of classes from the jars again. See sluice.launch.jvm_archive.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

from sluice.settings import load_settings
from sluice.spec import parse_spec


def main(scratch: Path) -> int:
    from sluice.contract import run_job
    from spark_jobs.driver.session import get_session
    from spark_jobs.run.runner import run_pipeline

    lake = scratch / "lake"
    (lake / "in" / "orders").mkdir(parents=True)
    (lake / "in" / "orders" / "a.json").write_text(
        "".join(f'{{"id": {i}, "ts": "2026-01-0{1 + i % 3}T10:00:00", "amount": {i}.5}}\n' for i in range(20)))
    (lake / "in" / "customers").mkdir(parents=True)
    (lake / "in" / "customers" / "a.csv").write_text(
        "id,name,version\n" + "".join(f"{i % 5},n{i},{i}\n" for i in range(20)))
    settings = load_settings({"SLUICE_HOME": str(load_settings().home), "SLUICE_LAKE_ROOT": str(lake),
                              "SLUICE_CHECKPOINT_ROOT": str(scratch / "checkpoints")})
    append = parse_spec({
        "name": "warmup_append", "source": {"format": "json", "path": "in/orders",
                                             "schema": "id BIGINT, ts TIMESTAMP, amount DOUBLE"},
        "transform": {"sql": "SELECT *, to_date(ts) AS day FROM source"},
        "sink": {"path": "out/orders", "partition_by": ["day"]},
    })
    merge = parse_spec({
        "name": "warmup_merge", "source": {"format": "csv", "path": "in/customers",
                                            "schema": "id INT, name STRING, version INT"},
        "sink": {"path": "out/customers", "mode": "merge", "keys": ["id"], "order_by": "version"},
    })
    spark = get_session(app_name="sluice-warmup")
    spark.sparkContext.setLogLevel("ERROR")
    try:
        for spec, dry_run in ((append, False), (append, False), (merge, True), (merge, False)):
            summary = run_pipeline(spark, spec, settings, run_job(dry_run=dry_run, run_id="warmup"))
            print(f"warm-up {spec.name}{' (dry run)' if dry_run else ''}: {summary.input_rows} rows", flush=True)
        touch_object_store(spark)
    finally:
        spark.stop()
    return 0


def touch_object_store(spark) -> None:
    """Load what a run on an object store loads before its first answer: S3A and the AWS SDK (~4,000 classes,
    ~1 s of every such run's driver when read from their jars). No store is needed: the client is made against a
    port nothing listens on, and Delta asks it for a table there, refused at once and not retried. Nothing when
    the S3A jars are not on the class path (sluice.launch.jvm_archive hands them over when fetched)."""
    import socket

    from py4j.protocol import Py4JError

    jvm = spark._jvm
    try:
        jvm.java.lang.Class.forName("org.apache.hadoop.fs.s3a.S3AFileSystem", False,
                                    jvm.java.lang.Thread.currentThread().getContextClassLoader())
    except Py4JError:
        return
    with socket.socket() as probe:  # a free port, closed again: connections to it are refused
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    session = spark.newSession()
    for key, value in {"fs.s3a.endpoint": f"http://127.0.0.1:{port}", "fs.s3a.path.style.access": "true",
                       "fs.s3a.endpoint.region": "us-east-1", "fs.s3a.access.key": "warmup",
                       "fs.s3a.secret.key": "warmup", "fs.s3a.attempts.maximum": "0", "fs.s3a.retry.limit": "0",
                       "fs.s3a.connection.establish.timeout": "2s", "fs.s3a.impl.disable.cache": "true"}.items():
        session.conf.set(key, value)
    started = time.monotonic()
    try:
        from delta.tables import DeltaTable

        DeltaTable.isDeltaTable(session, "s3a://sluice-warmup/table")
    except Exception:  # noqa: BLE001 - refused, as it should be: the classes are loaded
        pass
    print(f"warm-up object store client: {time.monotonic() - started:.1f} s", flush=True)


if __name__ == "__main__":
    with tempfile.TemporaryDirectory(prefix="sluice-warmup-") as tmp:
        sys.exit(main(Path(tmp)))
