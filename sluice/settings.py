"""Where sluice keeps things, read from the environment.

Every entry point (the DAG files, the operator, the CLI, the Spark job, the tests) resolves paths through
:func:`load_settings`, so a pipeline's table and checkpoint are the same folders whoever runs it.

=========================  ==========================================  =====================================
env                        meaning                                     default
=========================  ==========================================  =====================================
``SLUICE_HOME``            the project folder                          the folder holding this package
``SLUICE_PIPELINES``       folder of pipeline specs (``*.yaml``)       ``$SLUICE_HOME/include/pipelines``
``SLUICE_LAKE_ROOT``       relative source/sink paths start here       ``$SLUICE_HOME/var/lake``
                           (a folder, or ``s3a://bucket/lake``)
``SLUICE_CHECKPOINT_ROOT`` one checkpoint per pipeline under here      ``$SLUICE_HOME/var/checkpoints``
                           (a folder, or ``s3a://bucket/checkpoints``)
``SLUICE_LEDGER``          the run ledger (a Delta table)              ``$SLUICE_LAKE_ROOT/_sluice/ledger``
``SLUICE_JARS``            folder of fetched jars (``make jars``)      ``$SLUICE_HOME/var/jars``
``SLUICE_AIRFLOW_HOME``    AIRFLOW_HOME of ``sluice airflow``          ``$SLUICE_HOME/var/airflow``
``SLUICE_KAFKA_PORT``      port of the local broker (``make kafka-up``) ``9092``
``SLUICE_S3_PORT``         S3 port of the local object store           ``8333``
                           (``make s3-up``)
``SLUICE_SPARK_CONN_ID``   the Airflow connection naming the master    ``sluice_spark``
``SLUICE_SPARK_MASTER``    master of that connection when the project  ``local[*]``
                           defines it
``SLUICE_JVM_ARCHIVE``     ``off``: drivers start without the class    on (when ``make jvm-archive`` built it)
                           data archive
``SLUICE_DRIVER_JIT``      ``auto``: C2 held back until a run proves   ``auto``
                           large; ``full``: the JVM's default;
                           ``quick``: the JIT's first tier only
``SLUICE_IDLE_RUNS``       ``skip``: a run with nothing to do starts   ``skip``
                           no driver (``sluice.operations.idle``);
                           ``run``: every run starts one
``SLUICE_SPARK_CONF``      Spark settings of every driver, a JSON      none
                           object (a spec's ``spark_conf`` overrides)
``SLUICE_MAINTENANCE_SCHEDULE``  the maintenance DAG's schedule       ``@daily`` (``none``: manual runs only)
``SLUICE_STACK_HOME``      where ``make stack`` keeps its processes    ``$SLUICE_HOME/var/stack``
``SLUICE_STACK_<X>_PORT``  a port of ``make stack`` (e.g. ``API``)     see ``devservices.stack.Ports``
``SLUICE_LOCK_LEASE_SECONDS`` the lease of a lock in an object store  ``60``
``SLUICE_AWS_CONN_ID``     an Airflow ``aws`` connection for object    none: the AWS variables
                           storage (tasks)
``SLUICE_AIRFLOW_POOL``    the Airflow pool every sluice task takes a  ``sluice``
                           slot of (its spark-submit's admission)
``SLUICE_POOL_SLOTS``      that pool's slots when sluice creates it    one per 2.5 GiB of the machine's memory
``SLUICE_SHARED_DRIVER``   ``host``: a run is handed to this host's    ``off``: a spark-submit per run
                           long-lived driver (started by the first
                           run that needs it)
``SLUICE_SHARED_DRIVER_DIR``  the host drivers' folders (local)        ``<temp dir>/sluice-drivers-<uid>``
``SLUICE_SHARED_DRIVER_IDLE_SECONDS``  a host driver with nothing to   ``300``
                           do for this long stops
``SLUICE_CATALOG_URI``     the Hive metastore tables are registered    none: the local one
                           in (``thrift://host:9083``)                 (``var/catalog``, started on demand)
``SLUICE_CATALOG_PORT``    port of the local metastore                 ``9083``
``SLUICE_CATALOG_HOME``    the local metastore's folder                ``$SLUICE_HOME/var/catalog``
``SLUICE_CATALOG_BIND``    the address ``sluice catalog serve`` listens ``127.0.0.1``
                           on (``0.0.0.0`` in a container)
``SLUICE_CATALOG_DB_URL``  the local metastore's database (JDBC URL;   embedded Derby in its folder
                           ``_USER``, ``_PASSWORD``): PostgreSQL
``SLUICE_TABLE_NAMES``     ``auto``: every pipeline's table gets a     ``off``: only ``sink.table`` names
                           name (``bronze/orders`` -> ``bronze.orders``)
=========================  ==========================================  =====================================

This is the one place a ``SLUICE_*`` variable is read (a test holds it): the rest of sluice is handed the
:class:`Settings`, built once per process.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict

PROJECT_HOME = Path(__file__).resolve().parent.parent


class Settings(BaseModel):
    """Resolved, absolute locations and names. Frozen: read once, passed around."""

    model_config = ConfigDict(frozen=True)

    home: Path
    """The project folder (set-up puts ``.venv`` and ``var/`` here)."""
    pipelines_dir: Path
    """Where the DAG factory looks for ``*.yaml`` specs."""
    lake_root: Path | str
    """Relative ``source.path`` / ``sink.path`` values are resolved against this. A local folder is a
    ``Path``; an object store location its URI (``s3a://bucket/lake``), a ``str``: join with :func:`under`."""
    checkpoint_root: Path | str
    """A pipeline without ``checkpoint:`` keeps its checkpoint at ``<checkpoint_root>/<name>`` (a ``Path``, or
    an object store URI as ``lake_root``)."""
    ledger_path: Path | str
    """The run ledger, a Delta table with one row per run (``sluice status``); a ``Path`` or a URI."""
    jars_dir: Path
    """Holds ``spark/`` (Delta, Kafka connector), ``kafka/`` (the broker) and ``s3/`` (Hadoop's S3A), fetched by
    ``make jars``."""
    airflow_home: Path
    """AIRFLOW_HOME for ``sluice airflow`` and the make targets (SQLite metadata DB, logs, config)."""
    kafka_port: int
    """Port of the project's local Kafka broker (``sluice kafka up``); its data lives in ``var/kafka``."""
    s3_port: int = 8333
    """S3 port of the project's local object store (``sluice s3 up``); its data lives in ``var/s3``."""
    spark_conn_id: str
    """Airflow connection whose host is the Spark master."""
    spark_master: str
    """The master the project's own connection points at, when it defines one."""
    jvm_archive: bool = True
    """Drivers map the JVM class data archive (``var/jvm/spark-driver.jsa``) when it is there."""
    driver_jit: Literal["auto", "full", "quick"] = "auto"
    """How a driver's JVM compiles. ``auto``: the optimising tier (C2) held back until the run knows it is large
    (64 MiB of new files, 500,000 Kafka records, or a run it cannot size: spark_jobs/driver/jit.py): a run of a
    small increment spends most of its CPU compiling, and C2's compiles rarely pay back before it exits. ``full``:
    the JVM's default. ``quick``: the first tier only (``-XX:TieredStopAtLevel=1``), also for a large run, which
    it makes slower."""
    idle_runs: Literal["skip", "run"] = "skip"
    """``skip``: an incremental run that the launcher can prove has nothing to do (no new file, record or upstream
    version; no batch pending; the spec unchanged since the last run that ended well: :mod:`sluice.operations.idle`)
    starts no driver: its summary (``idle_run``) and ledger row are written by the launcher in a fraction of a
    second. ``run``: every run starts its driver, as before."""
    spark_conf: dict[str, str] = {}
    """Spark settings for every driver this deployment starts (and sluice's in-process sessions), over sluice's
    defaults and under a spec's own ``spark_conf``: e.g. a site's memory sizes, or, for a test suite of many
    tiny runs, Spark's interpreted expressions instead of generated code."""
    maintenance_schedule: str | None = "@daily"
    """The schedule of the ``sluice_maintenance`` DAG; None: manual runs only."""
    stack_home: Path | None = None
    """Where ``make stack`` keeps its processes' data and logs (None: ``var/stack``)."""
    stack_ports: dict[str, int] = {}
    """Ports of ``make stack`` set by ``SLUICE_STACK_<NAME>_PORT``, by lower-case name."""
    aws_conn_id: str | None = None
    """An Airflow connection (the Amazon provider's ``aws`` type) whose credentials and endpoint the tasks use
    for object storage; None: the AWS variables of the environment."""
    alert_conn_id: str | None = None
    """The Airflow connection freshness alerts go to when a spec's ``freshness.notify`` names none."""
    freshness_schedule: str | None = "*/15 * * * *"
    """The schedule of the ``sluice_freshness`` DAG; None: manual runs only."""
    airflow_pool: str = "sluice"
    """The Airflow pool every sluice task (a run's or a maintenance's spark-submit) takes a slot of: how many
    drivers one deployment starts at once is Airflow's admission control, not its global parallelism."""
    pool_slots: int = 4
    """The pool's slots when sluice creates it (``sluice airflow db migrate``, ``sluice airflow standalone``,
    ``make stack``); a pool that exists keeps the slots an operator gave it."""
    shared_driver: Literal["off", "host"] = "off"
    """``host``: a run or maintenance is handed to a long-lived driver on this host (one per set of Spark settings,
    jars, master and environment; :mod:`sluice.launch.host`), started by the first job that needs it and stopped
    after :attr:`shared_driver_idle_seconds` with nothing to do: the JVM's start is paid once, not per run."""
    shared_driver_dir: Path | None = None
    """Where the host drivers keep their folders (inbox, log); None: ``<temp dir>/sluice-drivers-<uid>``."""
    shared_driver_idle_seconds: float = 300.0
    """A host driver with no job for this long stops (the next job starts another)."""
    catalog_uri: str | None = None
    """``SLUICE_CATALOG_URI``: the Hive metastore (``thrift://host:port``) that table names are registered in;
    None: the local one (:attr:`metastore_uri`), which sluice starts when a run needs it."""
    catalog_port: int = 9083
    """Port of the local metastore (``sluice catalog up``)."""
    catalog_dir: Path | None = None
    """``SLUICE_CATALOG_HOME``: the local metastore's folder (None: ``var/catalog``)."""
    catalog_bind: str = "127.0.0.1"
    """``SLUICE_CATALOG_BIND``: the address ``sluice catalog serve`` listens on (a container's: ``0.0.0.0``); the
    local metastore sluice starts listens on 127.0.0.1 only."""
    catalog_db: dict[str, str] | None = None
    """``SLUICE_CATALOG_DB_URL`` (``jdbc:postgresql://host:5432/metastore``) with ``SLUICE_CATALOG_DB_USER`` and
    ``SLUICE_CATALOG_DB_PASSWORD``: the database of the metastore sluice runs (``url``, ``driver``, ``user``,
    ``password``); None: embedded Derby in its folder."""
    table_names: Literal["off", "auto"] = "off"
    """``auto``: a pipeline without ``sink.table`` gets a name from its sink folder (see
    :meth:`sluice.spec.PipelineSpec.table_name`); ``off``: only the specs that name their table have one."""
    lock_lease_seconds: float = 60.0
    """On object storage, the pipeline lock is a lease its holder renews (:class:`sluice.storage.lock.LeaseLock`): a holder that
    died blocks the next run at most this long."""

    @property
    def on_object_store(self) -> bool:
        """Whether anything sluice keeps for itself (tables, checkpoints, ledger) is on an object store."""
        return any("://" in str(p) for p in (self.lake_root, self.checkpoint_root, self.ledger_path))

    @property
    def var_dir(self) -> Path:
        return self.home / "var"

    ledger_spool_dir: Path | None = None
    """``SLUICE_LEDGER_SPOOL``: where ledger rows that could not be appended wait (:attr:`ledger_spool`)."""

    @property
    def ledger_spool(self) -> Path:
        """Where a run's ledger row waits when it cannot be appended (a full disk, a store down) until the next
        append (:mod:`sluice.operations.ledger_spool`): ``SLUICE_LEDGER_SPOOL``, else ``_ledger_spool`` beside
        the locks under a local checkpoint root, else ``var/ledger-spool`` (checkpoints in a bucket)."""
        if self.ledger_spool_dir is not None:
            return self.ledger_spool_dir
        if isinstance(self.checkpoint_root, Path):
            return self.checkpoint_root / "_ledger_spool"
        return self.var_dir / "ledger-spool"

    @property
    def kafka_home(self) -> Path:
        return self.var_dir / "kafka"

    @property
    def s3_home(self) -> Path:
        return self.var_dir / "s3"

    @property
    def catalog_home(self) -> Path:
        return self.catalog_dir or self.var_dir / "catalog"

    @property
    def metastore_uri(self) -> str:
        """The metastore names are registered in: ``SLUICE_CATALOG_URI``, else the local one."""
        return self.catalog_uri or f"thrift://127.0.0.1:{self.catalog_port}"

    def spark_jars(self) -> list[Path]:
        """The jars handed to spark-submit: Delta and the Kafka connector, as fetched at set-up, and sluice's
        own (``make sluice-jar``: the JSON field scan; a run without it parses as before, more slowly)."""
        return [*self._fetched("spark", "delta-spark_", "Delta's jars"), *sorted((self.jars_dir / "sluice").glob("*.jar"))]

    def object_store_jars(self) -> list[Path]:
        """Hadoop's S3A file system and the AWS SDK modules it uses (``s3a://`` paths), fetched at set-up."""
        return self._fetched("s3", "hadoop-aws-", "Hadoop's S3A jars")

    def _fetched(self, folder_name: str, marker: str, what: str) -> list[Path]:
        folder = self.jars_dir / folder_name
        jars = sorted(folder.glob("*.jar"))
        if not any(j.name.startswith(marker) for j in jars):
            raise FileNotFoundError(
                f"{what} are missing from {folder}: run `make jars` (Maven fetches them from the pinned pom.xml) "
                f"or point SLUICE_JARS at a folder that has {folder_name}/{marker}*.jar"
            )
        return jars


def load_settings(environ: Mapping[str, str] | None = None) -> Settings:
    env = os.environ if environ is None else environ
    home = Path(env.get("SLUICE_HOME") or PROJECT_HOME).resolve()

    def folder(key: str, default: Path) -> Path:
        value = env.get(key)
        return Path(value).expanduser().resolve() if value else default

    def location(key: str, default: Path | str) -> Path | str:
        """A folder, or an object store URI kept as it is (``s3a://bucket/lake``)."""
        value = env.get(key)
        if not value:
            return default
        return value.rstrip("/") if "://" in value else Path(value).expanduser().resolve()

    lake_root = location("SLUICE_LAKE_ROOT", home / "var" / "lake")
    schedule = env.get("SLUICE_MAINTENANCE_SCHEDULE", "@daily")
    freshness = env.get("SLUICE_FRESHNESS_SCHEDULE", "*/15 * * * *")
    return Settings(
        home=home,
        pipelines_dir=folder("SLUICE_PIPELINES", home / "include" / "pipelines"),
        lake_root=lake_root,
        ledger_path=location("SLUICE_LEDGER", under(lake_root, "_sluice", "ledger")),
        checkpoint_root=location("SLUICE_CHECKPOINT_ROOT", home / "var" / "checkpoints"),
        ledger_spool_dir=folder("SLUICE_LEDGER_SPOOL", None),
        jars_dir=folder("SLUICE_JARS", home / "var" / "jars"),
        airflow_home=folder("SLUICE_AIRFLOW_HOME", home / "var" / "airflow"),
        kafka_port=int(env.get("SLUICE_KAFKA_PORT") or 9092),
        s3_port=int(env.get("SLUICE_S3_PORT") or 8333),
        spark_conn_id=env.get("SLUICE_SPARK_CONN_ID") or "sluice_spark",
        spark_master=env.get("SLUICE_SPARK_MASTER") or "local[*]",
        jvm_archive=(env.get("SLUICE_JVM_ARCHIVE") or "").lower() not in ("off", "0", "false"),
        driver_jit=driver_jit(env.get("SLUICE_DRIVER_JIT")),
        idle_runs=idle_runs(env.get("SLUICE_IDLE_RUNS")),
        spark_conf=spark_conf(env.get("SLUICE_SPARK_CONF")),
        maintenance_schedule=None if schedule.lower() in ("", "none") else schedule,
        stack_home=folder("SLUICE_STACK_HOME", home / "var" / "stack"),
        stack_ports={key[len("SLUICE_STACK_"):-len("_PORT")].lower(): int(value) for key, value in env.items()
                     if key.startswith("SLUICE_STACK_") and key.endswith("_PORT") and value},
        lock_lease_seconds=float(env.get("SLUICE_LOCK_LEASE_SECONDS") or 60),
        aws_conn_id=env.get("SLUICE_AWS_CONN_ID") or None,
        alert_conn_id=env.get("SLUICE_ALERT_CONN_ID") or None,
        freshness_schedule=None if freshness.lower() in ("", "none") else freshness,
        airflow_pool=pool_name(env.get("SLUICE_AIRFLOW_POOL")),
        pool_slots=pool_slots(env.get("SLUICE_POOL_SLOTS")),
        shared_driver=shared_driver(env.get("SLUICE_SHARED_DRIVER")),
        shared_driver_dir=folder("SLUICE_SHARED_DRIVER_DIR", Path(tempfile.gettempdir()) / f"sluice-drivers-{os.getuid()}"),
        shared_driver_idle_seconds=idle_seconds(env.get("SLUICE_SHARED_DRIVER_IDLE_SECONDS")),
        catalog_uri=catalog_uri(env.get("SLUICE_CATALOG_URI")),
        catalog_port=int(env.get("SLUICE_CATALOG_PORT") or 9083),
        catalog_dir=folder("SLUICE_CATALOG_HOME", None),
        catalog_db=catalog_db(env),
        catalog_bind=(env.get("SLUICE_CATALOG_BIND") or "127.0.0.1").strip(),
        table_names=table_names(env.get("SLUICE_TABLE_NAMES")),
    )


def catalog_uri(value: str | None) -> str | None:
    """``SLUICE_CATALOG_URI`` read: unset or empty is the local metastore; else ``thrift://host:port``, several
    comma-separated (Hive's ``hive.metastore.uris``)."""
    if not (value or "").strip():
        return None
    uris = [u.strip() for u in value.split(",")]
    if not all(re.fullmatch(r"thrift://[^\s/:]+:\d+", u) for u in uris):
        raise ValueError(f"SLUICE_CATALOG_URI={value!r} is not a metastore address: give thrift://host:port (e.g. "
                         "thrift://metastore:9083), or unset it for the local metastore (sluice catalog up)")
    return ",".join(uris)


def catalog_db(env: Mapping[str, str]) -> dict[str, str] | None:
    """``SLUICE_CATALOG_DB_URL`` and its user and password read: a PostgreSQL JDBC URL, or unset (Derby)."""
    url = (env.get("SLUICE_CATALOG_DB_URL") or "").strip()
    if not url:
        return None
    if not url.startswith("jdbc:postgresql://"):
        raise ValueError(f"SLUICE_CATALOG_DB_URL={url!r} is not a PostgreSQL JDBC URL: give "
                         "jdbc:postgresql://host:5432/metastore (the database must exist), or unset it for "
                         "embedded Derby in the catalog's folder")
    return postgres_db(url, env.get("SLUICE_CATALOG_DB_USER") or "", env.get("SLUICE_CATALOG_DB_PASSWORD") or "")


def postgres_db(url: str, user: str, password: str) -> dict[str, str]:
    """A metastore database on PostgreSQL, as :attr:`Settings.catalog_db` holds it (``make stack``'s too)."""
    return {"url": url, "driver": "org.postgresql.Driver", "user": user, "password": password}


def table_names(value: str | None) -> Literal["off", "auto"]:
    """``SLUICE_TABLE_NAMES`` read: unset or empty is ``off``; anything but the two choices is refused."""
    choice = (value or "off").strip().lower()
    if choice not in ("off", "auto"):
        raise ValueError(f"SLUICE_TABLE_NAMES={value!r} is not a choice: set it to 'auto' (every pipeline's table "
                         "is registered under a name made from its sink folder) or 'off' (only sink.table names), "
                         "or unset it")
    return choice  # type: ignore[return-value]


DRIVER_MEMORY_GIB = 2.5
"""What one driver takes of the worker's memory: spark.driver.memory (2g, sluice.spark_conf) and the JVM's own."""


def pool_name(value: str | None) -> str:
    """``SLUICE_AIRFLOW_POOL`` read: unset or empty is ``sluice``; a name Airflow takes (letters, digits, ``_.-``)."""
    name = (value or "sluice").strip()
    if not re.fullmatch(r"[A-Za-z0-9_.-]{1,256}", name):
        raise ValueError(f"SLUICE_AIRFLOW_POOL={value!r} is not a pool name: use letters, digits, '_', '.' or '-' "
                         "(e.g. SLUICE_AIRFLOW_POOL=sluice), or unset it")
    return name


def pool_slots(value: str | None, memory_bytes: int | None = None) -> int:
    """``SLUICE_POOL_SLOTS`` read: a whole number of slots >= 1; unset or empty: one per
    :data:`DRIVER_MEMORY_GIB` of this machine's memory (at least 1), the drivers it can hold at once."""
    if not (value or "").strip():
        if memory_bytes is None:
            try:
                memory_bytes = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
            except (ValueError, OSError, AttributeError):
                return 4
        return max(1, int(memory_bytes / 2**30 // DRIVER_MEMORY_GIB))
    try:
        slots = int(value.strip())
    except ValueError:
        slots = 0
    if slots < 1:
        raise ValueError(f"SLUICE_POOL_SLOTS={value!r} is not a number of slots: give a whole number >= 1, the "
                         "spark-submits one worker runs at once (e.g. SLUICE_POOL_SLOTS=4), or unset it to size "
                         "it from the machine's memory")
    return slots


JIT_CHOICES = ("auto", "full", "quick")
SHARED_DRIVER_CHOICES = ("off", "host")


def shared_driver(value: str | None) -> Literal["off", "host"]:
    """``SLUICE_SHARED_DRIVER`` read: unset or empty is ``off``; anything but the two choices is refused."""
    choice = (value or "off").strip().lower()
    if choice not in SHARED_DRIVER_CHOICES:
        raise ValueError(f"SLUICE_SHARED_DRIVER={value!r} is not a choice: set it to 'host' (runs handed to this "
                         "host's long-lived driver) or 'off' (a spark-submit per run), or unset it")
    return choice  # type: ignore[return-value]


def idle_seconds(value: str | None) -> float:
    """``SLUICE_SHARED_DRIVER_IDLE_SECONDS`` read: a number of seconds > 0; unset or empty is 300."""
    if not (value or "").strip():
        return 300.0
    try:
        seconds = float(value.strip())
    except ValueError:
        seconds = 0.0
    if not seconds > 0:
        raise ValueError(f"SLUICE_SHARED_DRIVER_IDLE_SECONDS={value!r} is not a number of seconds: give one > 0, "
                         "how long a host driver waits for its next job before it stops (e.g. 300), or unset it")
    return seconds


def driver_jit(value: str | None) -> Literal["auto", "full", "quick"]:
    """``SLUICE_DRIVER_JIT`` read: unset or empty is ``auto``; anything but the three choices is refused."""
    choice = (value or "auto").strip().lower()
    if choice not in JIT_CHOICES:
        raise ValueError(f"SLUICE_DRIVER_JIT={value!r} is not a choice: set it to 'auto' (the optimising tier "
                         "held back until a run proves large), 'quick' (the JIT's first tier only, for short runs) "
                         "or 'full' (the JVM's default), or unset it")
    return choice  # type: ignore[return-value]


def idle_runs(value: str | None) -> Literal["skip", "run"]:
    """``SLUICE_IDLE_RUNS`` read: unset or empty is ``skip``; anything but the two choices is refused."""
    choice = (value or "skip").strip().lower()
    if choice not in ("skip", "run"):
        raise ValueError(f"SLUICE_IDLE_RUNS={value!r} is not a choice: set it to 'skip' (a run with nothing to do "
                         "starts no driver) or 'run' (every run starts its driver), or unset it")
    return choice  # type: ignore[return-value]


def spark_conf(value: str | None) -> dict[str, str]:
    """``SLUICE_SPARK_CONF`` read: a JSON object of Spark settings (values as strings, numbers or booleans);
    unset or empty is none. Anything else is refused, showing the form it takes."""
    if not (value or "").strip():
        return {}
    example = """e.g. SLUICE_SPARK_CONF='{"spark.driver.memory": "4g"}', or unset it"""
    try:
        parsed = json.loads(value)
    except ValueError as err:
        raise ValueError(f"SLUICE_SPARK_CONF is not JSON ({err}): give a JSON object of Spark settings, "
                         f"{example}") from None
    if not isinstance(parsed, dict):
        raise ValueError(f"SLUICE_SPARK_CONF is a JSON {type(parsed).__name__}, not an object: give a JSON object "
                         f"of Spark settings, {example}")
    conf: dict[str, str] = {}
    for key, item in parsed.items():
        if not key.startswith("spark.") or isinstance(item, (dict, list)) or item is None:
            raise ValueError(f"SLUICE_SPARK_CONF's {key!r}: {json.dumps(item)} is not a Spark setting: keys start "
                             f"with 'spark.' and values are strings, numbers or booleans, {example}")
        conf[key] = str(item).lower() if isinstance(item, bool) else str(item)
    return conf


def under(root: Path | str, *parts: str) -> Path | str:
    """``root`` joined with ``parts``: a ``Path`` under a folder, a URI under a URI."""
    if isinstance(root, Path):
        return root.joinpath(*parts)
    return "/".join([root.rstrip("/"), *(p.strip("/") for p in parts)])
