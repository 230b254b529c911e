"""sluice's own small files in a checkpoint, written the way Spark writes the checkpoint's logs.

Through Spark's ``CheckpointFileManager`` (the JVM's): a file is written whole (a temporary file renamed into
place, or the object store's atomic put), read, deleted, by URI -- the same code for a local path and an
object store, and the same file system Spark's offsets and commits go through (so a fault-injecting file
system, ``jvm/chaos``, can stop a run right before one of these writes, as it does before Spark's own).
"""

from __future__ import annotations

from pyspark.sql import SparkSession

from sluice.storage.checkpoint import Checkpoint

_MANAGER = "org.apache.spark.sql.execution.streaming.checkpointing.CheckpointFileManager"


def _manager(spark: SparkSession, path: str):
    jvm = spark._jvm
    hadoop_path = jvm.org.apache.hadoop.fs.Path(path)
    manager = getattr(jvm, _MANAGER).create(hadoop_path.getParent(), spark._jsc.hadoopConfiguration())
    return manager, hadoop_path


class SparkWriter:
    """sluice's files in a checkpoint written and deleted through Spark's CheckpointFileManager: the
    :class:`sluice.storage.checkpoint.Checkpoint` writer of a driver."""

    def __init__(self, spark: SparkSession) -> None:
        self.spark = spark

    def write_text(self, uri: str, text: str) -> None:
        write_text(self.spark, uri, text)

    def delete(self, uri: str) -> None:
        delete(self.spark, uri)


def checkpoint(spark: SparkSession, uri: str) -> Checkpoint:
    """The checkpoint at ``uri``, whose sluice files this driver writes the way Spark writes its logs."""
    return Checkpoint(uri, SparkWriter(spark))


def write_text(spark: SparkSession, path: str, text: str) -> None:
    """Write ``path`` whole, replacing what is there."""
    manager, hadoop_path = _manager(spark, path)
    out = manager.createAtomic(hadoop_path, True)
    try:
        out.write(bytearray(text.encode("utf-8")))
    except Exception:
        out.cancel()
        raise
    out.close()


def read_text(spark: SparkSession, path: str) -> str | None:
    """The file's text, or None when there is no such file."""
    manager, hadoop_path = _manager(spark, path)
    if not manager.exists(hadoop_path):
        return None
    stream = manager.open(hadoop_path)
    try:
        return bytes(spark._jvm.org.apache.commons.io.IOUtils.toByteArray(stream)).decode("utf-8")
    finally:
        stream.close()


def delete(spark: SparkSession, path: str) -> None:
    """Delete the file (nothing happens if it is not there)."""
    manager, hadoop_path = _manager(spark, path)
    manager.delete(hadoop_path)


QUERY_LOGS = ("offsets", "commits", "state")
"""The folders Spark requires empty when a query starts on a checkpoint with no planned batch."""


def clear_interrupted_start(spark: SparkSession, checkpoint: str) -> list[str]:
    """Delete what a query's first batch left half written, when it was killed before its first ``offsets/0``
    was in place: Spark's temporary files (hidden: ``.0.<uuid>.tmp``, their ``.crc``). Spark starts such a
    checkpoint as a new query, and a new query refuses a non-empty ``offsets`` folder
    (STATE_STORE_CHECKPOINT_LOCATION_NOT_EMPTY): every later run of the pipeline would fail. Nothing is
    deleted once a batch was planned, nor any file that is not hidden. Returns what was deleted."""
    jvm = spark._jvm
    root = jvm.org.apache.hadoop.fs.Path(checkpoint)
    manager = getattr(jvm, _MANAGER).create(root, spark._jsc.hadoopConfiguration())
    leftovers = []
    for name in QUERY_LOGS:
        folder = jvm.org.apache.hadoop.fs.Path(root, name)
        if not manager.exists(folder):
            continue
        for status in manager.list(folder):
            entry = status.getPath()
            if name == "offsets" and entry.getName().isdigit():
                return []  # a batch was planned: Spark resumes it, nothing here is a leftover
            if entry.getName().startswith("."):
                leftovers.append(entry)
    for entry in leftovers:
        manager.delete(entry)
    return [str(entry) for entry in leftovers]
