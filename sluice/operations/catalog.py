"""The catalog that table names are registered in: a Hive metastore, spoken to over Thrift.

Every sluice table that has a name (``sink.table``, or ``SLUICE_TABLE_NAMES=auto``) is registered in a Hive
metastore for its folder, the way Spark registers ``CREATE TABLE ... USING delta LOCATION ...``: any Spark
session pointed at the metastore (``sluice catalog conf`` prints the settings) reads ``spark.table("bronze.orders")``,
the columns coming from the table's Delta log.

``SLUICE_CATALOG_URI`` names the metastore (``thrift://host:9083``: the stack's, a team's). Without it, the local
one: Hive's own metastore server from the Hive 2.3 jars every PySpark install ships (the Thrift API Spark's
built-in Hive client speaks: no jar to fetch, no client to match), over an embedded Derby database in
``var/catalog``, on ``127.0.0.1:SLUICE_CATALOG_PORT`` only (started through ``jvm/catalog``'s
``BoundMetastore``: Hive 2.3's own main listens on every interface). It is one process that every run on the host talks to,
so runs register at the same time (Derby embedded in each run would let one process in at a time), started by
``sluice catalog up`` or by the first run that needs it, and left running.

Measured on this machine (2026-11-29): the server answers 8-11 s after its start (~260 MB); a run connects to
it in 0.6 s (:mod:`spark_jobs.sinks.names`), where a Hive-enabled session (``enableHiveSupport``) would start
Hive's whole client in every run (its first catalog call took 2.7 s) and tie the run's own session to the
metastore.
"""

from __future__ import annotations

import fcntl
import importlib.util
import os
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from xml.sax.saxutils import escape

from sluice.process import ServerState, log_tail, port_open, stop_process
from sluice.settings import Settings

START_TIMEOUT_S = 180.0
"""A cold start on a busy 2-core machine: 11 s idle, several times that under load."""
JVM_OPTIONS = ("-Xmx384m", "-XX:+UseSerialGC", "-Djava.awt.headless=true",
               "--add-opens=java.base/java.lang=ALL-UNNAMED", "--add-opens=java.base/java.util=ALL-UNNAMED",
               "--add-opens=java.base/java.net=ALL-UNNAMED", "--add-opens=java.base/java.lang.reflect=ALL-UNNAMED")


class CatalogError(RuntimeError):
    """The catalog cannot be reached or started; the message names it and says what to do."""


@dataclass
class LocalMetastore(ServerState):
    """The local metastore's folder and process (``var/catalog``: ``state.json``, ``metastore.log``)."""

    port: int

    @property
    def uri(self) -> str:
        return f"thrift://127.0.0.1:{self.port}"

    @property
    def log(self) -> Path:
        return self.home / "metastore.log"


def hive_jars() -> Path:
    """The folder of PySpark's jars (Hive 2.3's metastore among them), found without importing PySpark."""
    found = importlib.util.find_spec("pyspark")
    if found is None or not found.submodule_search_locations:
        raise CatalogError("PySpark is not installed in this environment: the local metastore runs from its jars "
                           "(run `make install`)")
    return Path(next(iter(found.submodule_search_locations))) / "jars"


def hive_site(home: Path, database: dict[str, str] | None = None) -> str:
    """The server's ``hive-site.xml``: an embedded Derby database in ``home`` unless ``database`` gives another
    (``url``, ``driver``, ``user``, ``password``: the stack's PostgreSQL)."""
    db = database or {"url": f"jdbc:derby:;databaseName={home / 'metastore_db'};create=true",
                      "driver": "org.apache.derby.jdbc.EmbeddedDriver"}
    settings = {
        "javax.jdo.option.ConnectionURL": db["url"],
        "javax.jdo.option.ConnectionDriverName": db["driver"],
        # the tables are made by the server at its first use of each (no schema tool run, no script to ship)
        "datanucleus.schema.autoCreateAll": "true",
        "hive.metastore.schema.verification": "false",
        "hive.metastore.warehouse.dir": str(home / "warehouse"),
        # Hive's default log4j2 set-up uses asynchronous loggers, whose library PySpark does not ship
        "hive.async.log.enabled": "false",
    }
    if "user" in db:
        settings["javax.jdo.option.ConnectionUserName"] = db["user"]
        settings["javax.jdo.option.ConnectionPassword"] = db.get("password", "")
    body = "".join(f"  <property><name>{k}</name><value>{escape(v)}</value></property>\n" for k, v in settings.items())
    return f"<?xml version=\"1.0\"?>\n<!-- written by sluice (sluice/operations/catalog.py) -->\n<configuration>\n{body}</configuration>\n"


METASTORE_CLASS = "dev.sluice.catalog.BoundMetastore"
"""Hive's server on one address (jvm/catalog): ``HiveMetaStore``'s own main listens on every interface."""


def server_jars(jars_dir: Path, database: dict[str, str] | None = None) -> list[Path]:
    """The jars a metastore server needs besides PySpark's: sluice's ``BoundMetastore`` (``make sluice-jar``)
    and, for a database that is not Derby, its JDBC driver (``var/jars/catalog``, ``make jars``)."""
    own = jars_dir / "metastore" / "sluice-metastore.jar"
    if not own.is_file():
        raise CatalogError(f"{own} is missing: run `make sluice-jar` (it compiles jvm/catalog), or `make install`")
    if database is None:
        return [own]
    drivers = sorted((jars_dir / "catalog").glob("postgresql-*.jar"))
    if not drivers:
        raise CatalogError(f"the PostgreSQL JDBC driver is missing from {jars_dir / 'catalog'}: run `make jars` "
                           "(Maven fetches it from the pinned pom.xml)")
    return [own, *drivers]


def server_command(home: Path, port: int, jars: list[Path], bind: str = "127.0.0.1") -> list[str]:
    """The ``java`` command line of a metastore server kept in ``home`` (its ``conf/`` first on the class path),
    listening on ``bind:port`` only."""
    classpath = os.pathsep.join([str(home / "conf"), *(str(j) for j in jars), str(hive_jars() / "*")])
    return ["java", *JVM_OPTIONS, f"-Dhive.log.dir={home}", "-Dhive.log.file=metastore.log",
            f"-Dderby.stream.error.file={home / 'derby.log'}", "-cp", classpath, METASTORE_CLASS, bind, str(port)]


def start_local(home: Path, port: int, jars: list[Path], *, timeout: float = START_TIMEOUT_S,
                database: dict[str, str] | None = None) -> LocalMetastore:
    """Start a metastore server kept in ``home`` on ``127.0.0.1:port`` (``jars``: :func:`server_jars`) and wait
    until it answers (:func:`_wait_for`); a server that did not is stopped."""
    home.mkdir(parents=True, exist_ok=True)
    existing = LocalMetastore.load(home)
    if existing and existing.running():
        raise CatalogError(f"the metastore from {home} is already running (pid {existing.pid}, {existing.uri})")
    if port_open(port):
        raise CatalogError(f"port {port} on 127.0.0.1 is taken: stop what uses it, or set SLUICE_CATALOG_PORT")
    _write_site(home, database)
    server = LocalMetastore(home=home, port=port)
    with server.log.open("ab") as out:
        process = subprocess.Popen(server_command(home, port, jars), stdout=out, stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL, cwd=home, start_new_session=True)
    server.pid = process.pid
    server.save()
    try:
        _wait_for(server, timeout, process)
    except CatalogError:
        stop_local(server)
        raise
    return server


def _write_site(home: Path, database: dict[str, str] | None) -> None:
    (home / "conf").mkdir(parents=True, exist_ok=True)
    (home / "conf" / "hive-site.xml").write_text(hive_site(home, database), encoding="utf-8")


def stop_local(server: LocalMetastore, timeout: float = 30.0) -> None:
    stop_process(server.pid, timeout)
    server.pid = None
    if server.home.is_dir():
        server.save()


def serve(settings: Settings) -> None:
    """Run the metastore in this process (``sluice catalog serve``: a container's command), on
    ``SLUICE_CATALOG_BIND``:``SLUICE_CATALOG_PORT``, its database ``SLUICE_CATALOG_DB_URL``'s or Derby in
    ``SLUICE_CATALOG_HOME``."""
    home = settings.catalog_home
    _write_site(home, settings.catalog_db)
    command = server_command(home, settings.catalog_port, server_jars(settings.jars_dir, settings.catalog_db),
                             settings.catalog_bind)
    os.chdir(home)
    os.execvp(command[0], command)


def local_running(settings: Settings) -> LocalMetastore | None:
    server = LocalMetastore.load(settings.catalog_home)
    return server if server is not None and server.running() else None


def ensure_catalog(settings: Settings) -> str:
    """The metastore URI a run registers in. ``SLUICE_CATALOG_URI``'s as it is (a server sluice does not
    run: down is the run's error to report); else the local one, started now (under a lock: two runs
    starting together start one) unless it answers already."""
    if settings.catalog_uri:
        return settings.catalog_uri
    home, port = settings.catalog_home, settings.catalog_port
    if port_open(port):
        return settings.metastore_uri
    home.mkdir(parents=True, exist_ok=True)
    with (home / "start.lock").open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not port_open(port):
            server = LocalMetastore.load(home)
            if server is not None and server.running():  # started, not answering yet: wait for it
                _wait_for(server)
            else:
                start_local(home, port, server_jars(settings.jars_dir, settings.catalog_db),
                            database=settings.catalog_db)
    return settings.metastore_uri


def _wait_for(server: LocalMetastore, timeout: float = START_TIMEOUT_S,
              process: subprocess.Popen | None = None) -> None:
    """Until the server's port opens (it does once the server has its database). Its process gone, or the
    deadline: :class:`CatalogError` with the end of its log. ``process``: the one just started, whose exit
    code the error gives."""
    deadline = time.monotonic() + timeout
    while not port_open(server.port):
        if process is not None and process.poll() is not None:
            raise CatalogError(f"the metastore at {server.uri} exited with code {process.returncode}"
                               f"{log_tail(server.log)}")
        if not server.running():
            raise CatalogError(f"the metastore at {server.uri} (pid {server.pid}) ended without answering"
                               f"{log_tail(server.log)}")
        if time.monotonic() > deadline:
            raise CatalogError(f"timed out after {timeout:.0f} s waiting for the metastore at {server.uri} to "
                               f"answer{log_tail(server.log)}")
        time.sleep(0.5)


def reader_conf(settings: Settings) -> dict[str, str]:
    """The Spark settings of a session that reads sluice's tables by name: Hive's catalog on the metastore,
    Delta's catalog over it, and (with a local lake) the warehouse in the catalog's folder."""
    conf = {
        "spark.sql.catalogImplementation": "hive",
        "spark.hadoop.hive.metastore.uris": settings.metastore_uri,
        "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
        "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
    }
    if not settings.catalog_uri:
        conf["spark.sql.warehouse.dir"] = str(settings.catalog_home / "warehouse")
    return conf
