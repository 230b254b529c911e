"""Shared fixtures: one SparkSession for the whole run, a fresh lake per test, an isolated Airflow home."""

from __future__ import annotations

import atexit
import logging
import os
import shutil
import tempfile
from pathlib import Path

import pytest

# Before anything imports Airflow or starts a JVM: an Airflow home of the test run's own, loopback Spark.
_AIRFLOW_HOME = Path(tempfile.mkdtemp(prefix="sluice-test-airflow-"))
os.environ["AIRFLOW_HOME"] = str(_AIRFLOW_HOME)
os.environ["SLUICE_AIRFLOW_HOME"] = str(_AIRFLOW_HOME)
os.environ["AIRFLOW__CORE__LOAD_EXAMPLES"] = "False"
os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
# Spark's scratch folders (the jars it copies per driver, ~35 MB, shuffle blocks) in one folder of the run's own,
# deleted at its end: a driver the tests kill on purpose cannot clean up after itself, and /tmp is shared.
_SPARK_SCRATCH = Path(tempfile.mkdtemp(prefix="sluice-test-spark-"))
os.environ["SPARK_LOCAL_DIRS"] = str(_SPARK_SCRATCH)
atexit.register(shutil.rmtree, _SPARK_SCRATCH, ignore_errors=True)
# py4j logs at INFO from __del__ during interpreter shutdown, after pytest closed the streams
logging.getLogger("py4j").setLevel(logging.WARNING)

from sluice.settings import Settings, load_settings  # noqa: E402

PROJECT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session")
def spark():
    """The one in-process SparkSession of the test run (local[2], Delta, the project's jars and conf)."""
    from spark_jobs.session import local_session

    session = local_session(load_settings(), app_name="sluice-tests")
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture
def lake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Settings:
    """Settings whose lake root, checkpoint root and pipelines folder are this test's own."""
    for key, sub in (("SLUICE_LAKE_ROOT", "lake"), ("SLUICE_CHECKPOINT_ROOT", "checkpoints"),
                     ("SLUICE_PIPELINES", "pipelines")):
        (tmp_path / sub).mkdir()
        monkeypatch.setenv(key, str(tmp_path / sub))
    return load_settings()


SASL_USER, SASL_PASSWORD = "sluice_test", "kafka-secret-d41d8cd98f"


@pytest.fixture(scope="session")
def kafka_broker(tmp_path_factory):
    """A real KRaft broker for the test run: PLAINTEXT, plus SASL_PLAINTEXT with one PLAIN user."""
    from sluice.kafka_broker import start_broker, stop_broker

    broker = start_broker(tmp_path_factory.mktemp("kafka"), load_settings().jars_dir,
                          sasl_users={SASL_USER: SASL_PASSWORD})
    yield broker
    stop_broker(broker)


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory):
    """A real S3-compatible server for the test run: SeaweedFS, built at set-up (``make s3-server``)."""
    from sluice.kafka_broker import free_port
    from sluice.s3_server import start_server, stop_server

    server = start_server(tmp_path_factory.mktemp("s3"), load_settings().var_dir, port=free_port())
    yield server
    stop_server(server, crash=True)  # its data is thrown away: no need to wait for a clean stop
