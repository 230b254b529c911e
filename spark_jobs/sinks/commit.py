"""What a sink write commits as (:class:`Commit`), and a MERGE run as that commit (:func:`in_transaction`).

The stream's writes are idempotent Delta transactions: ``txnAppId`` = the pipeline's id for this checkpoint,
``txnVersion`` = the batch id; Delta skips a write whose transaction it has committed already.
https://docs.delta.io/latest/delta-streaming.html#idempotent-table-writes-in-foreachbatch
"""

from __future__ import annotations

import json
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from pyspark.sql.types import StructType

TXN_APP_ID_CONF = "spark.databricks.delta.write.txnAppId"
TXN_VERSION_CONF = "spark.databricks.delta.write.txnVersion"
USER_METADATA_CONF = "spark.databricks.delta.commitInfo.userMetadata"
AUTO_MERGE_CONF = "spark.databricks.delta.schema.autoMerge.enabled"
ARBITRARY_PROPERTIES_CONF = "spark.databricks.delta.allowArbitraryProperties.enabled"


@dataclass(frozen=True)
class NewTable:
    """A sink table that does not exist yet: the first write creates it, with its properties, in one commit."""

    properties: dict[str, str]
    """Its table properties, as the write's ``delta.*`` options: the pipeline's identity (:mod:`spark_jobs.sinks.guards`)."""
    checkpoint_id: str
    """The checkpoint id in that identity (a run that writes no batch creates the table empty with it)."""
    schema: StructType
    """The run's output schema (the columns a batch lacks are created all the same, as the guards planned)."""


@dataclass(frozen=True)
class Commit:
    """What one Delta write commits as: the stream's idempotent transaction (``app_id`` with the batch id as
    its ``txnVersion``: Delta skips a write it has committed already) or, without ``app_id``, a plain one;
    with ``replace_where`` (a backfill, a rebuild) it replaces the rows matching that predicate."""

    batch_id: int
    app_id: str | None = None
    replace_where: str | None = None
    metadata: dict[str, Any] | None = None
    """The commit's userMetadata; a transaction's says its id and batch instead (what a replay looks for)."""
    merge_schema: bool = False
    """The commit evolves the table's schema (``mergeSchema``; a MERGE's ``autoMerge``)."""
    new_table: NewTable | None = None
    """An append or complete write to a table that may not exist yet: if it has no commit, this write creates
    it (:func:`spark_jobs.sinks.table.write_rows`)."""

    def user_metadata(self) -> str | None:
        if self.app_id is not None:
            return json.dumps({"sluice_app_id": self.app_id, "batch_id": self.batch_id})
        return json.dumps(self.metadata) if self.metadata else None


@contextmanager
def in_transaction(spark, commit: Commit):
    """A MERGE (which takes no write options) as the idempotent transaction ``commit``: Delta's session confs
    for it are set around it, then restored."""
    settings = {TXN_APP_ID_CONF: commit.app_id, TXN_VERSION_CONF: str(commit.batch_id),
                USER_METADATA_CONF: commit.user_metadata()}
    if commit.merge_schema:
        settings[AUTO_MERGE_CONF] = "true"
    with session_conf(spark, settings):
        yield


@contextmanager
def session_conf(spark, settings: dict[str, str]):
    """The session's Spark confs ``settings`` set around the block, then restored."""
    conf = spark.conf
    before = {key: conf.get(key, None) for key in settings}
    for key, value in settings.items():
        conf.set(key, value)
    try:
        yield
    finally:
        for key, value in before.items():
            conf.unset(key) if value is None else conf.set(key, value)
