"""A class data archive for the Spark driver's JVM: runs start seconds sooner.

A sluice run is short, so JVM start-up is much of its cost: the driver finds, reads, verifies and links
thousands of classes from Spark's and Delta's jars before the query starts. At set-up (``make
jvm-archive``, part of ``make install``) one warm-up run (spark_jobs/warmup.py) goes through the real code
path in a JVM started with ``-XX:ArchiveClassesAtExit``; the JVM writes the classes it loaded to
``var/jvm/spark-driver.jsa`` (JDK 13+ dynamic AppCDS). Every later driver maps that file at start with
``-XX:SharedArchiveFile``. Measured here: SparkSession start 8 s -> 5 s, a run that finds no data 18 s -> 11 s.

Safe by construction: a JVM that cannot use the archive (another JDK build, other jars) ignores it and
loads classes as usual (``-Xshare:auto``, the default; its CDS messages are silenced). Delete the file, or
set SLUICE_JVM_ARCHIVE=off, to run without it.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

from sluice.settings import Settings, load_settings
from sluice.spark_conf import archive_path


def object_store_jars(settings: Settings) -> list[Path]:
    """S3A's jars when fetched: a run on an object store gets them too (sluice.launch.submit), and the warm-up
    loads their classes (spark_jobs/warmup.py), so such a run's driver maps them as well; a local run's never
    loads them."""
    try:
        return settings.object_store_jars()
    except FileNotFoundError:
        return []


def build(settings: Settings) -> Path:
    """Run the warm-up job in a JVM that archives its classes at exit; returns the archive."""
    from sluice.launch.submit import (
        SubmitPlan,
        spark_env,
        spark_jobs_dir,
        spark_submit_command,
    )
    from sluice.spark_conf import default_spark_conf

    target = archive_path(settings)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_suffix(".tmp")
    tmp.unlink(missing_ok=True)
    jobs = spark_jobs_dir()
    # the same spark-submit, conf and jars as a run (sluice.launch.submit), so the driver's class path matches
    options = f"-Dlog4j2.configurationFile=file:{jobs / 'log4j2.properties'} -XX:ArchiveClassesAtExit={tmp}"
    plan = SubmitPlan(
        application=str(jobs / "warmup.py"), application_args=[],
        conf={**default_spark_conf(), "spark.driver.extraJavaOptions": options},
        jars=",".join(str(j) for j in [*settings.spark_jars(), *object_store_jars(settings)]), name="sluice-warmup",
        conn_id=settings.spark_conn_id,
    )
    cmd = spark_submit_command(plan, "local[*]")
    bin_dir = str(Path(sys.executable).parent)
    env = {**os.environ, **spark_env(settings), "PATH": bin_dir + os.pathsep + os.environ.get("PATH", "")}
    print("building the JVM class archive: " + " ".join(shlex.quote(c) for c in cmd[:3]) + " ... warmup.py",
          flush=True)
    done = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if done.returncode != 0 or not tmp.is_file():
        tail = "\n".join(done.stdout.splitlines()[-20:])
        raise RuntimeError(f"the warm-up run failed (exit {done.returncode}); runs work without the archive, "
                           f"only slower. Its output ended with:\n{tail}")
    tmp.replace(target)
    return target


if __name__ == "__main__":
    path = build(load_settings())
    print(f"JVM class archive: {path} ({path.stat().st_size // 2**20} MiB)")
