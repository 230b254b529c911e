"""What a run needs to know about its Delta sink: its version, and which versions a query wrote."""

from __future__ import annotations

import json
from typing import Any

from delta.tables import DeltaTable
from pyspark.sql import SparkSession

from sluice.storage.delta_log import DeltaLog, log_state
from sluice.storage.files import local_path
from sluice.storage.object_store import delta_rs_location


def current_version(spark: SparkSession, path: str) -> int | None:
    """The table's latest version, or None if there is no Delta table at ``path`` yet."""
    local = log_state(path)
    if local is not None:
        return local["version"]
    if uncommitted_log(path) or not DeltaTable.isDeltaTable(spark, path):
        return None
    return DeltaTable.forPath(spark, path).history(1).select("version").first()[0]


def uncommitted_log(path: str) -> bool:
    """A local ``_delta_log`` that holds no commit: a table whose creation died before its first commit (a
    crash, kill -9). Delta says "is a Delta table" of it, then fails to read it; it is no table yet."""
    log = DeltaLog.open(path)
    try:
        return log is not None and not log.versions()
    except OSError:
        return False


def commits_since(
    spark: SparkSession, path: str, version: int | None, query_id: str, latest: int | None = None,
    app_id: str | None = None,
) -> dict[int, dict[str, Any]]:
    """Commits made by the streaming query ``query_id`` after ``version`` (all, if None), by batch (epoch) id:
    the writes and MERGEs its foreachBatch made as transaction ``app_id`` (and, in a table's history from
    before sluice wrote every sink that way, Delta streaming-sink commits of ``query_id``).

    Each value holds the Delta ``version`` and the commit's ``output_rows`` (for a MERGE: rows inserted,
    updated and deleted). With ``latest`` (the table's current version) only the commits after ``version``
    are read, not the whole history: the cost stays that of this run's commits however long the history.
    """
    if version is not None and latest is not None and latest <= version:
        return {}
    log = DeltaLog.open(path)
    if log is not None:
        rows = log.history(version)
    else:
        if not DeltaTable.isDeltaTable(spark, path):
            return {}
        table = DeltaTable.forPath(spark, path)
        history = table.history(latest - version) if version is not None and latest is not None else table.history()
        if version is not None:
            history = history.where(f"version > {int(version)}")
        columns = ("version", "operation", "operationParameters", "operationMetrics", "userMetadata")
        rows = [r.asDict() for r in history.select(*columns).collect()]
    found: dict[int, dict[str, Any]] = {}
    for row in rows:
        params = row["operationParameters"] or {}
        metrics = row["operationMetrics"] or {}
        if row["operation"] == "STREAMING UPDATE" and params.get("queryId") == query_id:
            found[int(params["epochId"])] = {
                "version": int(row["version"]),
                "output_rows": int(metrics.get("numOutputRows", 0)),
            }
        elif app_id:
            meta = json_object(row["userMetadata"])
            if meta.get("sluice_app_id") != app_id:
                continue
            if row["operation"] == "MERGE":
                merge = {
                    "inserted": int(metrics.get("numTargetRowsInserted", 0)),
                    "updated": int(metrics.get("numTargetRowsUpdated", 0)),
                    "deleted": int(metrics.get("numTargetRowsDeleted", 0)),
                }
                found[int(meta["batch_id"])] = {
                    "version": int(row["version"]), "output_rows": sum(merge.values()), "merge": merge,
                }
            else:  # WRITE: an append, or a complete-mode overwrite
                found[int(meta["batch_id"])] = {
                    "version": int(row["version"]), "output_rows": int(metrics.get("numOutputRows", 0)),
                }
    return found


def txn_version(path: str, app_id: str) -> int | None:
    """The latest ``txnVersion`` the table committed for ``app_id`` (the idempotent writes' id), read with
    delta-rs (on local disk or an object store); None if there is none or it cannot be read that way."""
    if DeltaLog.open(path) is None:
        return None
    try:
        from deltalake import DeltaTable as RustDeltaTable

        location, options = delta_rs_location(local_path(path) or path)
        return RustDeltaTable(location, storage_options=options).transaction_version(app_id)
    except Exception:  # noqa: BLE001 - an optimisation only: without it the replay is read, and Delta skips its write
        return None


# The state is a few thousand actions of a wide schema: compiling Java code for its projections costs a cold
# driver seconds that interpreting them never does (docs/performance.md)
INTERPRETED = {"spark.sql.codegen.wholeStage": "false", "spark.sql.codegen.factoryMode": "NO_CODEGEN"}


def warm_state(spark: SparkSession, path: str) -> None:
    """Delta's state of the table's latest version computed now, for the run's write to find done: Delta 4.4
    answers an idempotent write's "was this batch committed?" (``txnAppId``/``txnVersion``) only from the
    whole state of the table, rebuilt by three Spark jobs that a cold driver spends seconds compiling, not
    from the version's checksum. Called on a thread of its own while the run prepares its query: the write
    asks the same snapshot (Delta caches a table's log and its latest snapshot per session's JVM) and waits
    for this computation rather than starting its own; a commit in between only makes it wasted work. Computed
    in a copy of the run's session whose expressions are interpreted (:data:`INTERPRETED`): the caller's
    session and its settings are as they were."""
    jvm = spark._jvm
    sessions = jvm.org.apache.spark.sql.SparkSession
    session = spark._jsparkSession.cloneSession()  # the run's settings, its expressions interpreted
    for key, value in INTERPRETED.items():
        session.conf().set(key, value)
    before = sessions.getActiveSession()
    sessions.setActiveSession(session)  # the calling thread's: Delta's jobs run in the active session
    try:
        log = jvm.org.apache.spark.sql.delta.DeltaLog.forTable(session, path)
        none = jvm.scala.Option.empty()
        log.update(False, none, none).transactions()
    finally:
        if before.isDefined():
            sessions.setActiveSession(before.get())
        else:
            sessions.clearActiveSession()


def json_object(text: str | None) -> dict[str, Any]:
    try:
        value = json.loads(text) if text else {}
    except json.JSONDecodeError:
        return {}
    return value if isinstance(value, dict) else {}


def as_json(value: Any) -> Any:
    """Progress offsets arrive as JSON text or objects; give them back as objects."""
    if isinstance(value, str):
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            return value
    return value
