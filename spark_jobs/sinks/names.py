"""Table names: a pipeline's tables registered in the catalog (a Hive metastore) for their folders.

After a run (its data committed), each named table that exists is registered the way Spark's
``CREATE TABLE <name> USING delta LOCATION '<folder>'`` records it: an external table whose provider is
``delta``, whose folder is the storage property ``path``, and whose columns the metastore does not hold (a
reader takes them from the Delta log; an added or widened column is there at once, with no catalog write).
So a catalog entry changes only when its folder does: a name already registered for the table's folder is
left alone (a read, no write: the catalog's history is not a copy of the table's), a name that sluice
registered for this pipeline at another folder is moved to this one, and a name another table holds is
refused. A run killed between its commit and the registration leaves the name to the next run, which
registers it (each run checks). A catalog that does not answer fails the run after its commit, with the
catalog named; the next run registers.

The registration speaks to the metastore with Hive's own Thrift client (``HiveMetaStoreClient``, in the driver's
JVM: PySpark ships it), not through a Hive-enabled session: the run's session is the same with and without a
name, and the metastore is only needed once the data is in.
"""

from __future__ import annotations

import getpass
import json
import posixpath
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from sluice.operations.catalog import CatalogError, ensure_catalog
from sluice.settings import Settings
from sluice.spec import DeltaSource, PipelineSpec, SpecError
from sluice.storage.delta_log import DeltaLog

PIPELINE_PARAMETER = "sluice.pipeline"
"""The table parameter that says which pipeline registered a name (so that its own name may move)."""
PLACEHOLDER = "-__PLACEHOLDER__"
"""Spark's suffix for the metastore location of a table whose folder is in its ``path`` property."""
EMPTY_SCHEMA = json.dumps({"type": "struct", "fields": []}, separators=(",", ":"))


class NameTaken(RuntimeError):
    """The name is registered for another table."""


def register_tables(spark: SparkSession, spec: PipelineSpec, settings: Settings, *, table: str,
                    quarantine: str) -> dict[str, Any] | None:
    """Register the pipeline's named tables that exist; what was done, for the run summary's ``catalog``:
    ``{"uri", "table", "action", "quarantine": {"table", "action"}}`` (an action: ``created``, ``unchanged``,
    ``moved``). None: the pipeline's table has no name. Raises :class:`CatalogError` or :class:`NameTaken`."""
    sink_name = spec.table_name(settings)
    wanted = [(sink_name, table), (spec.quarantine_table_name(settings), quarantine)]
    wanted = [(name, folder) for name, folder in wanted if name]
    if not wanted:
        return None
    existing = [(name, folder) for name, folder in wanted if DeltaLog.open(folder) is not None]
    if not existing:
        return None
    uri = ensure_catalog(settings)
    client = connect(spark, uri)
    try:
        done = {name: register(spark, client, name, folder, spec.identity) for name, folder in existing}
    finally:
        client.close()
    result: dict[str, Any] = {"uri": uri}
    if sink_name in done:
        result.update(table=sink_name, action=done.pop(sink_name))
    if done:
        name, action = next(iter(done.items()))
        result["quarantine"] = {"table": name, "action": action}
    return result


def connect(spark: SparkSession, uri: str):
    """Hive's metastore client in the driver's JVM, connected to ``uri``; :class:`CatalogError` if it does
    not answer (three tries, a second apart)."""
    jvm = spark.sparkContext._jvm
    conf = jvm.org.apache.hadoop.hive.conf.HiveConf()
    conf.set("hive.metastore.uris", uri)
    conf.set("hive.metastore.connect.retries", "3")
    conf.set("hive.metastore.client.connect.retry.delay", "1s")
    conf.set("hive.metastore.client.socket.timeout", "120s")
    try:
        return jvm.org.apache.hadoop.hive.metastore.HiveMetaStoreClient(conf)
    except Exception as err:  # noqa: BLE001 - Py4JJavaError: MetaException "Could not connect to meta store"
        raise CatalogError(
            f"the catalog (Hive metastore {uri}) does not answer: {_java_message(err)}. Start it (`sluice catalog "
            "up` for the local one; SLUICE_CATALOG_URI names another) and run again: the data of this run is "
            "committed, and the next run registers the table") from None


def register(spark: SparkSession, client, name: str, folder: str, pipeline: str) -> str:
    """Register ``name`` (``schema.table``) for the Delta table in ``folder``: ``created``, ``unchanged``
    (already there, nothing written) or ``moved`` (this pipeline's name, now for another folder)."""
    schema, table = name.split(".")
    location = _location(folder)
    _ensure_database(spark, client, schema)
    found = _get_table(client, schema, table)
    if found is None:
        try:
            client.createTable(_table(spark, client, schema, table, location, pipeline))
        except Exception as err:  # noqa: BLE001 - another run registered it a moment ago
            if "AlreadyExistsException" not in _java_class(err):
                raise
            found = _get_table(client, schema, table)
            if found is None:
                raise
        else:
            _remove_placeholder(client, schema, table)
            return "created"
    registered = _registered_folder(found)
    if registered == location:
        return "unchanged"
    owner = found.getParameters().get(PIPELINE_PARAMETER)
    if owner != pipeline:
        by = f"pipeline {owner}" if owner else "a table sluice did not register"
        raise NameTaken(
            f"the catalog name {name} is registered for {registered} ({by}), not for this pipeline's table "
            f"{location}: give sink.table another name, or drop that table from the catalog (DROP TABLE {name}: "
            "an external table, its folder is kept). The data of this run is committed")
    found.getSd().getSerdeInfo().getParameters().put("path", location)
    client.alter_table(schema, table, found)
    return "moved"


def lookup(spark: SparkSession, settings: Settings, name: str) -> str | None:
    """The folder the catalog registers ``name`` for (None: not registered)."""
    client = connect(spark, ensure_catalog(settings))
    try:
        schema, table = name.split(".")
        found = _get_table(client, schema, table)
        return None if found is None else _registered_folder(found)
    finally:
        client.close()


def named_upstream(spark: SparkSession, spec: PipelineSpec, settings: Settings) -> PipelineSpec:
    """``spec``, with a Delta source that names a table no pipeline of the folder writes (``source.table``)
    given the folder the catalog registers under that name."""
    source = spec.source
    if not isinstance(source, DeltaSource) or not source.table or source.path:
        return spec
    folder = lookup(spark, settings, source.table)
    if folder is None:
        raise SpecError(spec.name, [f"source.table: {source.table!r} is neither the sink.table of a pipeline in "
                                    f"{settings.pipelines_dir} nor registered in the catalog "
                                    f"({settings.metastore_uri}): run the pipeline that writes it first, or fix "
                                    "source.table"])
    if folder.startswith("file:"):  # a local folder: as a path, like the lake's
        folder = "/" + folder.removeprefix("file:").lstrip("/")
    return spec.model_copy(update={"source": source.model_copy(update={"path": folder})})


def _location(folder: str) -> str:
    """A folder as Spark records it in the catalog: a URI, ``file:`` for a local one."""
    if folder.startswith("file:"):
        return "file:" + posixpath.normpath("/" + folder.removeprefix("file:").lstrip("/"))
    return folder.rstrip("/") if "://" in folder else "file:" + posixpath.normpath(str(Path(folder).resolve()))


def _registered_folder(table) -> str:
    parameters = table.getSd().getSerdeInfo().getParameters()
    found = parameters.get("path") if parameters is not None else None
    return _location(found or table.getSd().getLocation())


def _ensure_database(spark: SparkSession, client, schema: str) -> None:
    jvm = spark.sparkContext._jvm
    try:
        client.getDatabase(schema)
        return
    except Exception as err:  # noqa: BLE001
        if "NoSuchObjectException" not in _java_class(err):
            raise
    database = jvm.org.apache.hadoop.hive.metastore.api.Database(schema, "", None, jvm.java.util.HashMap())
    try:
        client.createDatabase(database)
    except Exception as err:  # noqa: BLE001 - two runs creating it together
        if "AlreadyExistsException" not in _java_class(err):
            raise


def _get_table(client, schema: str, table: str):
    try:
        return client.getTable(schema, table)
    except Exception as err:  # noqa: BLE001
        if "NoSuchObjectException" in _java_class(err):
            return None
        raise


def _table(spark: SparkSession, client, schema: str, table: str, location: str, pipeline: str):
    """The metastore entry Spark writes for ``CREATE TABLE ... USING delta LOCATION ...`` (read back from
    Spark 4.2's own and mirrored here): external, provider ``delta``, no columns of its own, the folder in the
    storage property ``path`` and a placeholder location under the schema's folder."""
    jvm = spark.sparkContext._jvm
    api = jvm.org.apache.hadoop.hive.metastore.api
    db_location = client.getDatabase(schema).getLocationUri().rstrip("/")
    serde = api.SerDeInfo()
    serde.setSerializationLib("org.apache.hadoop.hive.serde2.lazy.LazySimpleSerDe")
    serde.setParameters(_map(jvm, {"serialization.format": "1", "path": location}))
    columns = jvm.java.util.ArrayList()
    columns.add(api.FieldSchema("col", "array<string>", "from deserializer"))
    sd = api.StorageDescriptor()
    sd.setCols(columns)
    sd.setLocation(f"{db_location}/{table}{PLACEHOLDER}")
    sd.setInputFormat("org.apache.hadoop.mapred.SequenceFileInputFormat")
    sd.setOutputFormat("org.apache.hadoop.hive.ql.io.HiveSequenceFileOutputFormat")
    sd.setCompressed(False)
    sd.setNumBuckets(-1)
    sd.setSerdeInfo(serde)
    sd.setBucketCols(jvm.java.util.ArrayList())
    sd.setSortCols(jvm.java.util.ArrayList())
    sd.setParameters(jvm.java.util.HashMap())
    entry = api.Table()
    entry.setDbName(schema)
    entry.setTableName(table)
    entry.setOwner(getpass.getuser())
    entry.setTableType("EXTERNAL_TABLE")
    entry.setSd(sd)
    entry.setPartitionKeys(jvm.java.util.ArrayList())
    entry.setParameters(_map(jvm, {
        "EXTERNAL": "TRUE", "spark.sql.sources.provider": "delta", "spark.sql.sources.schema": EMPTY_SCHEMA,
        "spark.sql.partitionProvider": "catalog", "spark.sql.create.version": spark.version,
        PIPELINE_PARAMETER: pipeline,
    }))
    return entry


def _remove_placeholder(client, schema: str, table: str) -> None:
    """The metastore makes the placeholder's folder (empty); Spark removes it, and so does sluice when it is
    on this host (the local metastore's warehouse)."""
    location = client.getTable(schema, table).getSd().getLocation()
    if location.startswith("file:") and location.endswith(PLACEHOLDER):
        folder = Path(location.removeprefix("file:"))
        try:
            folder.rmdir()
        except OSError:
            pass


def _map(jvm, values: dict[str, str]):
    found = jvm.java.util.HashMap()
    for key, value in values.items():
        found.put(key, value)
    return found


def _java_class(err: Exception) -> str:
    java = getattr(err, "java_exception", None)
    return "" if java is None else java.getClass().getName()


def _java_message(err: Exception) -> str:
    java = getattr(err, "java_exception", None)
    if java is None:
        return str(err)
    message = str(java.getMessage() or java.getClass().getName())
    return message.strip().splitlines()[0][:500]  # Hive's message goes on with the cause's stack trace
