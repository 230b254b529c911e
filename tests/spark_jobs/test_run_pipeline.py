"""The spark-submit entry point's start-up: where the driver imports pyspark from."""

from __future__ import annotations

from pathlib import Path

import pyspark

from spark_jobs.run_pipeline import prefer_installed_pyspark

SITE = Path(pyspark.__file__).parent.parent  # the installed package's site-packages
ZIPS = [str(SITE / "pyspark" / "python" / "lib" / "pyspark.zip"),
        str(SITE / "pyspark" / "python" / "lib" / "py4j-0.10.9.9-src.zip")]


def test_the_installed_pysparks_own_zips_go_after_the_installed_package():
    # spark-submit's PYTHONPATH puts the zips first; the installed package (byte-compiled) is the same code
    path = [*ZIPS, "/app", str(SITE)]

    prefer_installed_pyspark(path)

    assert path == ["/app", str(SITE), *ZIPS]


def test_zips_of_another_spark_stay_first():
    # a Spark distribution's own python/lib (SPARK_HOME=/opt/spark): another pyspark than the installed one
    other = ["/opt/spark/python/lib/pyspark.zip", "/opt/spark/python/lib/py4j-0.10.9.9-src.zip"]
    path = [*other, str(SITE)]

    prefer_installed_pyspark(path)

    assert path == [*other, str(SITE)]


def test_without_the_installed_package_on_the_path_the_zips_stay():
    path = [*ZIPS, "/app"]

    prefer_installed_pyspark(path)

    assert path == [*ZIPS, "/app"]


def run_python(code: str, **env: str) -> list[str]:
    """``code`` in a fresh interpreter (this one has the test suite's imports): its stdout's lines."""
    import os
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[2]), **env})
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.split()


def test_the_driver_answers_pysparks_numpy_check_without_its_test_helpers():
    # Given the driver's stand-in for pyspark.testing.utils, which PySpark asks for have_numpy on every call
    out = run_python(
        "import sys, importlib.util; from spark_jobs.driver.start import answer_numpy_check; answer_numpy_check(); "
        "from pyspark.testing.utils import have_numpy; "  # what pyspark/sql/types.py asks
        "print(have_numpy == (importlib.util.find_spec('numpy') is not None), 'pandas' in sys.modules); "
        "from pyspark.testing.utils import assertDataFrameEqual; "  # any other name: PySpark's real module
        "import pyspark.testing.utils as real; "
        "print(assertDataFrameEqual.__module__, real.__file__.endswith('pyspark/testing/utils.py'))")
    # Then have_numpy is PySpark's answer without pandas imported, and other names come from the real module
    assert out == ["True", "False", "pyspark.testing.utils", "True"]


def test_the_drivers_session_starts_on_a_thread_while_the_run_is_imported():
    # Given a driver's start: the session on its thread, the run's code imported beside it
    out = run_python(
        "import signal, sys; from spark_jobs.driver.start import start_session; session = start_session(); "
        "import spark_jobs.run.runner; spark = session.wait(); "
        "print(spark.range(5).count(), session.seconds > 0, 'pandas' in sys.modules, "
        "signal.getsignal(signal.SIGINT) is not signal.default_int_handler); spark.stop()",
        PYSPARK_SUBMIT_ARGS="--master local[1] --conf spark.ui.enabled=false pyspark-shell", SPARK_LOCAL_IP="127.0.0.1")
    # Then the session runs a query, its start was timed, no pandas came with it, and Ctrl-C cancels its jobs
    assert out == ["5", "True", "False", "True"]
