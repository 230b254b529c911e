"""Shared fixtures: one SparkSession for the whole run, a fresh lake per test, an isolated Airflow home."""

from __future__ import annotations

import atexit
import json
import logging
import os
import shutil
import tempfile
from pathlib import Path

import pytest

# Before anything imports Airflow or starts a JVM: an Airflow home of the test run's own, loopback Spark.
_AIRFLOW_HOME = Path(tempfile.mkdtemp(prefix="sluice-test-airflow-"))
atexit.register(shutil.rmtree, _AIRFLOW_HOME, ignore_errors=True)
os.environ["AIRFLOW_HOME"] = str(_AIRFLOW_HOME)
os.environ["SLUICE_AIRFLOW_HOME"] = str(_AIRFLOW_HOME)
os.environ["AIRFLOW__CORE__LOAD_EXAMPLES"] = "False"
# A test process's Airflow CLI runs share its DB, and several tests' DAGs have the same ids (sluice_maintenance,
# sluice_freshness, a pipeline called orders) over other pipelines: a parse must store what it found even when
# another test stored that DAG id seconds before (Airflow skips the write within this interval, 30 s by default,
# and a `tasks test` then reads the other test's DAG: "Task maintain_orders not found").
os.environ["AIRFLOW__CORE__MIN_SERIALIZED_DAG_UPDATE_INTERVAL"] = "0"
os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
# Every driver the tests start (spark-submit from the CLI, Airflow tasks, the chaos harness) runs a few rows and
# exits: the JIT's first tier only takes ~25% off each (sluice.settings, SLUICE_DRIVER_JIT). The session's own
# long-lived JVM keeps the full JIT (the ``spark`` fixture).
os.environ.setdefault("SLUICE_DRIVER_JIT", "quick")
# Spark compiles Java code for every query plan (whole-stage code generation, then each projection's and
# predicate's): worth it for millions of rows, not for the tests' handfuls, each a new plan. The suite's drivers
# and its session evaluate expressions as they stand (measured: a one-row spark-submit run -15% CPU, the SCD2
# tests -38% of the session's CPU). The results are the same by Spark's contract: both paths run Spark's own
# test suites. The stack test (tests/e2e/test_stack.py) runs its drivers with Spark's defaults, code generation
# on, and compares their tables with a run of the same pipelines here.
SUITE_SPARK_CONF = {"spark.sql.codegen.wholeStage": "false", "spark.sql.codegen.factoryMode": "NO_CODEGEN"}
os.environ.setdefault("SLUICE_SPARK_CONF", json.dumps(SUITE_SPARK_CONF))
# The sluice pool of the suite's Airflow DBs (created when `sluice airflow db migrate` makes the template): two
# spark-submits at once on the two-core machine, whatever its memory would allow (tests/e2e/test_airflow_pool.py)
os.environ.setdefault("SLUICE_POOL_SLOTS", "2")
# Spark's scratch folders (the jars it copies per driver, ~35 MB, shuffle blocks) in one folder of the run's own,
# deleted at its end: a driver the tests kill on purpose cannot clean up after itself, and /tmp is shared.
_SPARK_SCRATCH = Path(tempfile.mkdtemp(prefix="sluice-test-spark-"))
os.environ["SPARK_LOCAL_DIRS"] = str(_SPARK_SCRATCH)
atexit.register(shutil.rmtree, _SPARK_SCRATCH, ignore_errors=True)
# py4j logs at INFO from __del__ during interpreter shutdown, after pytest closed the streams
logging.getLogger("py4j").setLevel(logging.WARNING)

from sluice.settings import Settings, load_settings  # noqa: E402

PROJECT = Path(__file__).resolve().parent.parent
DURATIONS = Path(__file__).resolve().parent / "durations.json"
"""Each test's duration (call + set-up + tear-down, seconds) in a recent full run: `make test` starts the longest
first, so that its two workers end together (docs/development.md, "How the suite runs"). Written by
``SLUICE_RECORD_DURATIONS=path``; a test missing from it counts as a short one."""


def pytest_collection_modifyitems(config, items):
    """Longest first (recorded durations), then the rest in their files' order, dealt out to the workers.

    `make test` uses xdist's ``worksteal``: worker *i* of *k* is handed the *i*-th contiguous share of this
    order, and a worker that runs out takes the far end of another's queue. So the tests are dealt like cards,
    longest first: share *i* holds tests *i*, *i + k*, *i + 2k*, ... of the longest-first order, each share itself
    longest first; what is stolen at the end is short. (A long Airflow test left last would run alone while
    the other worker waits.) The order is the same in every worker, as xdist requires."""
    try:
        known = json.loads(DURATIONS.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        known = {}
    # a file whose tests share a module-scoped fixture (a server of its own, a parsed DagBag) stays together:
    # dealt out test by test, the fixture would be set up again at every change of file
    units: dict[str, list] = {}
    for item in items:
        key = item.nodeid.split("::")[0] if _uses_module_fixture(item) else item.nodeid
        units.setdefault(key, []).append(item)
    ranked = sorted(units.values(), key=lambda unit: -sum(known.get(i.nodeid, 0.0) for i in unit))  # stable
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT") or 1)
    items[:] = [item for share in range(workers) for unit in ranked[share::workers] for item in unit]


def _uses_module_fixture(item) -> bool:
    info = getattr(item, "_fixtureinfo", None)
    return info is not None and any(defs and defs[-1].scope == "module" for defs in info.name2fixturedefs.values())


_durations: dict[str, float] = {}


def pytest_runtest_logreport(report):
    if os.environ.get("SLUICE_RECORD_DURATIONS"):
        _durations[report.nodeid] = round(_durations.get(report.nodeid, 0.0) + report.duration, 2)


def pytest_sessionfinish(session):
    target = os.environ.get("SLUICE_RECORD_DURATIONS")
    if target and _durations and not hasattr(session.config, "workerinput"):  # the controller writes it once
        Path(target).write_text(json.dumps(dict(sorted(_durations.items())), indent=0) + "\n", encoding="utf-8")


@pytest.fixture(scope="session")
def spark():
    """The one in-process SparkSession of the test run (local[2], Delta, the project's jars and conf)."""
    from spark_jobs.driver.session import local_session

    session = local_session(load_settings().model_copy(update={"driver_jit": "full"}), app_name="sluice-tests")
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
    from devservices.kafka_broker import start_broker, stop_broker

    broker = start_broker(tmp_path_factory.mktemp("kafka"), load_settings().jars_dir,
                          sasl_users={SASL_USER: SASL_PASSWORD})
    yield broker
    stop_broker(broker)


@pytest.fixture(scope="session")
def metastore(tmp_path_factory):
    """A real Hive metastore for the test run (Hive 2.3's server from PySpark's jars, embedded Derby), as
    ``sluice catalog up`` starts it; tests point SLUICE_CATALOG_URI at it."""
    from devservices.kafka_broker import free_port
    from sluice.operations.catalog import server_jars, start_local, stop_local

    server = start_local(tmp_path_factory.mktemp("metastore"), free_port(), server_jars(load_settings().jars_dir))
    yield server
    stop_local(server)


@pytest.fixture(scope="session")
def team_metastore():
    """The same metastore with its database on PostgreSQL, as `make stack` and docker-compose's `metastore` run
    it: the stack's own PostgreSQL and metastore (its code: Debian's package, the ``metastore`` database) alone,
    on free ports."""
    from devservices.kafka_broker import free_port
    from devservices.stack import Ports, Stack, metastore_home
    from sluice.operations.catalog import LocalMetastore

    home = Path(tempfile.mkdtemp(prefix="sluice-team-metastore-"))
    home.chmod(0o755)  # PostgreSQL runs as the user postgres
    (home / "logs").mkdir()
    settings = load_settings({**os.environ, "SLUICE_STACK_HOME": str(home)})
    stack = Stack(settings, Ports(postgres=free_port(), metastore=free_port()))
    try:
        stack._postgres()
        stack._metastore(timeout=180)
        yield LocalMetastore.load(metastore_home(settings))
    finally:
        stack.down()  # the metastore, then PostgreSQL (nothing else was started)
        shutil.rmtree(home, ignore_errors=True)


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory):
    """A real S3-compatible server for the test run: SeaweedFS, built at set-up (``make s3-server``)."""
    from devservices.kafka_broker import free_port
    from devservices.s3_server import start_server, stop_server

    server = start_server(tmp_path_factory.mktemp("s3"), load_settings().var_dir, port=free_port())
    yield server
    stop_server(server, crash=True)  # its data is thrown away: no need to wait for a clean stop
