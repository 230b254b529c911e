"""`make stack`: the topology of docker-compose.yaml as local processes on 127.0.0.1, without Docker.

PostgreSQL (Debian's package) as Airflow's metadata DB; the Airflow 3 services (api-server, scheduler,
dag-processor, triggerer) with LocalExecutor and low parallelism; a Spark standalone master and one worker
(Spark's own ``spark-class``); the project's Kafka broker; the S3 object store; the catalog of table names (the
metastore of ``sluice catalog``, its database on the PostgreSQL). The Spark connection points at the standalone
master, so every task's spark-submit runs its executors on the worker.

Everything lives under ``var/stack/`` (data, logs, ``state.json`` with the pids). ``sluice stack up`` is
idempotent (a running service is left alone); ``sluice stack down`` stops them in reverse order.
"""

from __future__ import annotations

import glob
import json
import os
import pwd
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from devservices.kafka_broker import port_open
from devservices.readiness import http_answer, http_json, wait_until
from devservices.s3_server import (
    S3Server,
    client_env,
    create_bucket,
    start_server,
    stop_server,
)
from sluice.process import alive, stop_process
from sluice.settings import Settings, postgres_db


class StackError(RuntimeError):
    pass


@dataclass(frozen=True)
class Ports:
    postgres: int = 5433
    api: int = 8080
    spark_master: int = 7077
    spark_master_ui: int = 8081
    spark_worker_ui: int = 8082
    scheduler_health: int = 8974
    s3: int = 8334
    """The stack's own object store (not `make s3-up`'s, on 8333)."""
    metastore: int = 9084
    """The stack's own catalog (not `make catalog-up`'s, on 9083)."""

    @classmethod
    def of(cls, settings: Settings) -> Ports:
        """Defaults, or ``SLUICE_STACK_<NAME>_PORT`` (e.g. ``SLUICE_STACK_API_PORT=8090``, in the settings)."""
        return cls(**{name: settings.stack_ports.get(name, default) for name, default in cls().__dict__.items()})


def stack_home(settings: Settings) -> Path:
    """``var/stack``, or ``SLUICE_STACK_HOME``."""
    return settings.stack_home or settings.var_dir / "stack"


def stack_env(settings: Settings, ports: Ports | None = None) -> dict[str, str]:
    """The environment of the stack's Airflow processes (and of tests or users talking to them): the project's
    environment, with Airflow on PostgreSQL + LocalExecutor and the Spark connection on the standalone master."""
    from sluice.launch.environment import project_env

    ports = ports or Ports.of(settings)
    home = stack_home(settings)
    master = f"spark://127.0.0.1:{ports.spark_master}"
    env = {**os.environ, **project_env(settings)}
    env.update({
        # the lake, checkpoints, locks and ledger in the stack's object store, as docker-compose.yaml keeps them:
        # the Spark worker's executors reach them over the S3 API (its environment has the credentials)
        "SLUICE_LAKE_ROOT": f"s3a://{STACK_BUCKET}/lake",
        "SLUICE_CHECKPOINT_ROOT": f"s3a://{STACK_BUCKET}/checkpoints",
        **client_env(s3_home(settings), ports.s3),
        "AIRFLOW_HOME": str(home / "airflow"),
        "SLUICE_AIRFLOW_HOME": str(home / "airflow"),
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"postgresql+psycopg2://airflow:airflow@127.0.0.1:{ports.postgres}/airflow",
        "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
        "AIRFLOW__API__PORT": str(ports.api),
        "AIRFLOW__API__HOST": "127.0.0.1",
        "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"http://127.0.0.1:{ports.api}/execution/",
        "AIRFLOW__API_AUTH__JWT_SECRET": "sluice-local-stack",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": "admin:admin",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(home / "airflow" / "passwords.json"),
        "AIRFLOW__SCHEDULER__ENABLE_HEALTH_CHECK": "True",
        "AIRFLOW__SCHEDULER__SCHEDULER_HEALTH_CHECK_SERVER_PORT": str(ports.scheduler_health),
        "SLUICE_SPARK_MASTER": master,
        # the project's Spark connection, on the standalone master (an env connection wins over the DB)
        f"AIRFLOW_CONN_{settings.spark_conn_id.upper()}": json.dumps(
            {"conn_type": "spark", "host": "spark://127.0.0.1", "port": ports.spark_master}),
        "SPARK_LOCAL_IP": "127.0.0.1",
        # the stack's metastore: runs register their named tables there (docker-compose.yaml's `metastore`)
        "SLUICE_CATALOG_URI": f"thrift://127.0.0.1:{ports.metastore}",
    })
    # two spark-submits at once (the Spark worker's cores), unless told: the sluice pool's slots, not a cap on
    # Airflow's parallelism
    env.setdefault("SLUICE_POOL_SLOTS", "2")
    # the sample DAGs run on their schedules once the stack is up (set it to True to unpause them yourself)
    env.setdefault("AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION", "False")
    return env


STACK_BUCKET = "lake"
"""The bucket of the stack's object store that holds the lake and the checkpoints (as in docker-compose.yaml)."""


def s3_home(settings: Settings) -> Path:
    return stack_home(settings) / "s3"


def metastore_home(settings: Settings) -> Path:
    return stack_home(settings) / "metastore"


def kafka_home(settings: Settings) -> Path:
    """The stack's own broker (not `make kafka-up`'s), on ``SLUICE_KAFKA_PORT``."""
    return stack_home(settings) / "kafka"


def _pg_bin() -> Path:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/postgres"))
    if not found:
        raise StackError("PostgreSQL is not installed: run `make stack` (it installs Debian's postgresql package) "
                         "or `apt-get install postgresql`")
    return Path(found[-1]).parent


def _as_postgres(cmd: list[str]) -> list[str]:
    """PostgreSQL refuses to run as root: as root, run its commands as the `postgres` user."""
    return ["runuser", "-u", "postgres", "--", *cmd] if os.geteuid() == 0 else cmd


class Stack:
    """Start and stop the local stack; ``state.json`` remembers the pids."""

    SERVICES = ("postgres", "kafka", "s3", "metastore", "spark-master", "spark-worker", "airflow-api-server", "airflow-scheduler",
                "airflow-dag-processor", "airflow-triggerer")

    def __init__(self, settings: Settings, ports: Ports | None = None):
        self.settings = settings
        self.ports = ports or Ports.of(settings)
        self.home = stack_home(settings)
        self.logs = self.home / "logs"
        self.env = stack_env(settings, self.ports)

    # --- state ---------------------------------------------------------------------------------------

    @property
    def state_file(self) -> Path:
        return self.home / "state.json"

    def state(self) -> dict[str, int]:
        try:
            return json.loads(self.state_file.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}

    def _save(self, name: str, pid: int | None) -> None:
        state = self.state()
        if pid is None:
            state.pop(name, None)
        else:
            state[name] = pid
        self.home.mkdir(parents=True, exist_ok=True)
        self.state_file.write_text(json.dumps(state, indent=1), encoding="utf-8")

    def running(self, name: str) -> bool:
        return alive(self.state().get(name))

    def status(self) -> dict[str, bool]:
        return {name: self.running(name) for name in self.SERVICES}

    # --- up -----------------------------------------------------------------------------------------

    def up(self, timeout: float = 300) -> None:
        self.logs.mkdir(parents=True, exist_ok=True)
        self._postgres()
        self._kafka()
        self._s3(timeout)
        self._metastore(timeout)
        self._spark(timeout)
        self._airflow(timeout)

    def _spawn(self, name: str, cmd: list[str], env: dict[str, str] | None = None) -> int:
        if self.running(name):
            return self.state()[name]
        with (self.logs / f"{name}.log").open("ab") as log:
            process = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                       env=env or self.env, cwd=self.settings.home, start_new_session=True)
        self._save(name, process.pid)
        return process.pid

    def _wait(self, what: str, check, timeout: float, log: str, every: float = 1.0) -> None:
        wait_until(what, check, timeout, self.logs / log, every=every, error=StackError)

    def _postgres(self) -> None:
        data = self.home / "postgres"
        bin_dir = _pg_bin()
        if not (data / "PG_VERSION").is_file():
            data.mkdir(parents=True, exist_ok=True)
            if os.geteuid() == 0:
                user = pwd.getpwnam("postgres")
                for path in (data, self.logs):
                    os.chown(path, user.pw_uid, user.pw_gid)
                closed = [p for p in data.parents if not os.stat(p).st_mode & 0o001]
                if closed:
                    raise StackError(
                        f"PostgreSQL runs as the user postgres, which cannot enter {closed[0]} to reach {data}: "
                        f"allow it (chmod o+x {closed[0]}) or set SLUICE_STACK_HOME to a folder it can reach")
            _check(_as_postgres([str(bin_dir / "initdb"), "-D", str(data), "-U", "postgres", "--auth=trust",
                                 "-E", "UTF8"]), "initdb")
        if not port_open(self.ports.postgres):
            log = self.logs / "postgres.log"
            if os.geteuid() == 0 and not log.exists():
                log.touch()
                user = pwd.getpwnam("postgres")
                os.chown(log, user.pw_uid, user.pw_gid)
            _check(_as_postgres([
                str(bin_dir / "pg_ctl"), "-D", str(data), "-l", str(log), "-w", "start",
                "-o", f"-p {self.ports.postgres} -c listen_addresses=127.0.0.1 -k /tmp -c max_connections=100"]),
                f"pg_ctl start (log: {log})")
        pid = int((data / "postmaster.pid").read_text().split()[0])
        self._save("postgres", pid)
        psql = ["psql", "-h", "127.0.0.1", "-p", str(self.ports.postgres), "-U", "postgres", "-tAc"]
        exists = subprocess.run([*psql, "SELECT 1 FROM pg_roles WHERE rolname = 'airflow'"], check=True,
                                capture_output=True, text=True).stdout.strip()
        if not exists:
            subprocess.run([*psql, "CREATE ROLE airflow LOGIN PASSWORD 'airflow'"], check=True, capture_output=True)
            subprocess.run([*psql, "CREATE DATABASE airflow OWNER airflow"], check=True, capture_output=True)
        if not subprocess.run([*psql, "SELECT 1 FROM pg_database WHERE datname = 'metastore'"], check=True,
                              capture_output=True, text=True).stdout.strip():
            subprocess.run([*psql, "CREATE DATABASE metastore OWNER airflow"], check=True, capture_output=True)

    def _metastore(self, timeout: float) -> None:
        """The catalog of table names on the stack's PostgreSQL (as docker-compose.yaml's `metastore`)."""
        from sluice.operations.catalog import (
            CatalogError,
            LocalMetastore,
            server_jars,
            start_local,
        )

        home = metastore_home(self.settings)
        server = LocalMetastore.load(home)
        if not (server and server.running()):
            database = postgres_db(f"jdbc:postgresql://127.0.0.1:{self.ports.postgres}/metastore", "airflow", "airflow")
            try:
                server = start_local(home, self.ports.metastore, server_jars(self.settings.jars_dir, database),
                                     timeout=timeout, database=database)
            except CatalogError as err:
                raise StackError(str(err)) from None
        self._save("metastore", server.pid)

    def _kafka(self) -> None:
        from devservices.kafka_broker import Broker, start_broker

        broker = Broker.load(kafka_home(self.settings))
        if not (broker and broker.running()):
            broker = start_broker(kafka_home(self.settings), self.settings.jars_dir, port=self.settings.kafka_port)
        self._save("kafka", broker.pid)

    def _s3(self, timeout: float) -> None:
        server = S3Server.load(s3_home(self.settings))
        if not (server and server.running()):
            server = start_server(s3_home(self.settings), self.settings.var_dir, port=self.ports.s3, timeout=timeout)
        create_bucket(server, STACK_BUCKET)
        self._save("s3", server.pid)

    def _spark(self, timeout: float) -> None:
        spark_class = shutil.which("spark-class", path=str(Path(sys.executable).parent)) or str(
            Path(__import__("pyspark").__file__).parent / "bin" / "spark-class")
        env = {**self.env, "SPARK_LOG_DIR": str(self.logs), "SPARK_WORKER_DIR": str(self.home / "spark-work"),
               # an application takes one core unless it asks for more: with the sluice pool's 2 slots, two
               # pipelines run side by side instead of the second waiting for the first's executors
               # https://spark.apache.org/docs/latest/spark-standalone.html#resource-scheduling
               "SPARK_MASTER_OPTS": "-Dspark.deploy.defaultCores=1"}
        self._spawn("spark-master", [spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                                     "--port", str(self.ports.spark_master), "--webui-port",
                                     str(self.ports.spark_master_ui)], env)
        self._wait("the Spark master", lambda: port_open(self.ports.spark_master), timeout, "spark-master.log")
        cores = str(max(1, os.cpu_count() or 2))
        self._spawn("spark-worker", [spark_class, "org.apache.spark.deploy.worker.Worker",
                                     f"spark://127.0.0.1:{self.ports.spark_master}", "--host", "127.0.0.1",
                                     "--cores", cores, "--memory", "4g", "--webui-port",
                                     str(self.ports.spark_worker_ui)], env)
        self._wait("the Spark worker's registration", self._worker_registered, timeout, "spark-worker.log")

    def _worker_registered(self) -> bool:
        # the master's UI answers before it is whole: an empty or half-written body is "not yet" (http_json)
        # and its Jetty answers 404 until the page's handlers are attached (seen on a busy machine)
        master = http_json(f"http://127.0.0.1:{self.ports.spark_master_ui}/json/", not_yet_codes=(404,))
        workers = master.get("workers") if isinstance(master, dict) else None
        return any(isinstance(w, dict) and w.get("state") == "ALIVE" for w in workers or [])

    def _airflow(self, timeout: float) -> None:
        airflow = str(Path(sys.executable).parent / "airflow")
        home = Path(self.env["AIRFLOW_HOME"])
        home.mkdir(parents=True, exist_ok=True)
        passwords = home / "passwords.json"
        if not passwords.exists():
            passwords.write_text(json.dumps({"admin": "admin"}), encoding="utf-8")
        # `sluice airflow db migrate`: the migration, then the sluice pool (created once, kept after)
        migrate = subprocess.run([str(Path(sys.executable).parent / "sluice"), "airflow", "db", "migrate"],
                                 env=self.env, capture_output=True, text=True)
        if migrate.returncode != 0:
            raise StackError(f"sluice airflow db migrate failed: {migrate.stderr[-2000:]}")
        self._spawn("airflow-api-server", [airflow, "api-server", "--port", str(self.ports.api)])
        self._spawn("airflow-scheduler", [airflow, "scheduler"])
        self._spawn("airflow-dag-processor", [airflow, "dag-processor"])
        self._spawn("airflow-triggerer", [airflow, "triggerer"])
        self._wait("the Airflow api-server", lambda: self._http_ok(f"http://127.0.0.1:{self.ports.api}/api/v2/monitor/health"),
                   timeout, "airflow-api-server.log")
        self._wait("the Airflow scheduler", lambda: self._http_ok(f"http://127.0.0.1:{self.ports.scheduler_health}/health"),
                   timeout, "airflow-scheduler.log")

    @staticmethod
    def _http_ok(url: str) -> bool:
        """A health endpoint answered 2xx (the scheduler's answers with an empty body; a 5xx, a reset or a
        connection closed mid-answer: not yet)."""
        return http_answer(url) is not None

    # --- down ---------------------------------------------------------------------------------------

    def down(self, timeout: float = 60) -> list[str]:
        from devservices.kafka_broker import Broker, stop_broker
        from sluice.operations.catalog import LocalMetastore, stop_local

        own_state = {"s3": (S3Server, s3_home(self.settings), stop_server),
                     "kafka": (Broker, kafka_home(self.settings), stop_broker),
                     "metastore": (LocalMetastore, metastore_home(self.settings), stop_local)}
        stopped = []
        for name in reversed(self.SERVICES):
            if name == "postgres":
                if (self.home / "postgres" / "postmaster.pid").is_file():
                    subprocess.run(_as_postgres([str(_pg_bin() / "pg_ctl"), "-D", str(self.home / "postgres"),
                                                 "-m", "fast", "-w", "stop"]), capture_output=True)
                    stopped.append(name)
                self._save(name, None)
                continue
            if name in own_state:  # a server that keeps its own state in its folder
                state_class, home, stop = own_state[name]
                server = state_class.load(home)
                if server and server.running():
                    stop(server)
                    stopped.append(name)
                self._save(name, None)
                continue
            pid = self.state().get(name)
            if pid and self.running(name):
                stop_process(pid, timeout)
                stopped.append(name)
            self._save(name, None)
        return stopped


def _check(cmd: list[str], what: str) -> None:
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        raise StackError(f"{what} failed (exit {done.returncode}): {(done.stderr or done.stdout).strip()[-2000:]}")
