"""What is waiting for a pipeline: its backlog, from its spec and checkpoint, without Spark or Airflow.

* **files**: the files in the source folder the checkpoint has not taken (the listing minus Spark's source
  log), their bytes and the oldest one's modification time. One listing of the folder (local disk or a
  bucket) and one read of the source log: 10,000 unseen files answer in about a second.
* **Kafka**: per partition, the latest offset (the high watermark) minus the end offset of the last batch
  the checkpoint committed (before the first run: from ``starting_offsets``), and the sum.
* **Delta source**: the upstream table's latest version minus the last version the checkpoint consumed.

``sluice backlog`` prints it; every run summary carries it as ``backlog_before`` / ``backlog_after`` (what
arrived during the run shows in the second). A backlog that cannot be measured (a broker that does not
answer, a source on a file system sluice does not list) says why in ``error`` instead of failing anything.
"""

from __future__ import annotations

import fnmatch
import json
import posixpath
import re
import time
from datetime import UTC, datetime
from typing import Any

from sluice.settings import Settings
from sluice.spec import DeltaSource, KafkaSource, PipelineSpec
from sluice.storage.checkpoint import Checkpoint, file_key, source_file
from sluice.storage.object_store import is_object_store_uri

GLOB = re.compile(r"[*?\[{]")


def measure(spec: PipelineSpec, settings: Settings, *, timeout_seconds: float = 10.0,
            kafka_config: dict[str, str] | None = None, kafka_committed: tuple | None = None) -> dict[str, Any]:
    """The pipeline's backlog: ``{"source": "files", "files": n, "bytes": n, "oldest_at": iso}``,
    ``{"source": "kafka", "offsets": n, "partitions": {"topic/0": n}}`` or
    ``{"source": "delta", "versions": n, "upstream_version": v}``; with ``error`` (and no counts) when it
    could not be measured (never an exception: a backlog is a report). ``measured_in_s``: how long that took.
    ``kafka_config``: the Kafka client properties of the run (a run's driver has the connection's secrets);
    ``kafka_committed``: ``(offsets,)``, where the checkpoint's last batch ended as read before (default: read
    now)."""
    started = time.monotonic()
    source = spec.source
    kind = "kafka" if isinstance(source, KafkaSource) else "delta" if isinstance(source, DeltaSource) else "files"
    checkpoint = Checkpoint(spec.checkpoint_path(settings))
    try:
        if kind == "kafka":
            found = kafka_backlog(source, checkpoint, timeout_seconds=timeout_seconds, config=kafka_config,
                                  committed=kafka_committed)
        elif kind == "delta":
            found = delta_backlog(spec.source_path(settings), checkpoint)
        else:
            found = files_backlog(spec.source_path(settings), checkpoint, options=source.options)
    except BacklogUnknown as err:
        found = {"error": str(err)}
    except Exception as err:  # noqa: BLE001 - the store or folder could not be read, the log was odd
        found = {"error": f"{type(err).__name__}: {err}"}
    return {"source": kind, **found, "measured_in_s": round(time.monotonic() - started, 3)}


class BacklogUnknown(RuntimeError):
    """The backlog cannot be measured; the message says why."""


def describe(backlog: dict[str, Any] | None) -> str:
    """One line for a table: ``3 files (1.2 KB) since 09:14``, ``120 offsets in 3 partitions``, ..."""
    if not backlog:
        return "-"
    if backlog.get("error"):
        return f"unknown ({backlog['error'][:100]})"
    if backlog["source"] == "kafka":
        busy = sum(1 for lag in backlog["partitions"].values() if lag)
        return f"{backlog['offsets']} offsets" + (f" in {busy} partition(s)" if busy else "")
    if backlog["source"] == "delta":
        return f"{backlog['versions']} version(s) (upstream at {backlog['upstream_version']})"
    since = f" since {backlog['oldest_at']}" if backlog.get("oldest_at") else ""
    return f"{backlog['files']} files ({_size(backlog['bytes'])}){since}"


def _size(n: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} B"


# --- files ----------------------------------------------------------------------------------------

def files_backlog(source_root: str, checkpoint: Checkpoint, *, options: dict[str, Any] | None = None) -> dict[str, Any]:
    """The files under ``source_root`` (a folder, or a glob) that the checkpoint's source log does not hold,
    listed as Spark's file source lists them (:func:`source_files`)."""
    seen = {path for entry in checkpoint.source_log() if (path := source_file(entry["path"])) is not None}
    files = size = 0
    oldest: int | None = None
    for uri, length, mtime in source_files(source_root, options):
        if file_key(uri) in seen:
            continue
        files += 1
        size += length
        oldest = mtime if oldest is None else min(oldest, mtime)
    oldest_at = datetime.fromtimestamp(oldest / 1e9, UTC).isoformat(timespec="seconds") if oldest else None
    return {"files": files, "bytes": size, "oldest_at": oldest_at}


def source_files(source_root: str, options: dict[str, Any] | None = None, *, start_after: str | None = None):
    """Every input file under ``source_root`` (a folder, or a glob), as ``(uri, size, mtime_ns)``: every level of
    sub-folders, names Spark's file source skips left out at any level (:func:`hidden`), the path's glob and
    ``pathGlobFilter`` on file names applied. One listing (local disk or a bucket). ``start_after``: only the
    names below the folder that sort after it (``source.listing: incremental``; in a bucket, ``StartAfter``)."""
    from pyarrow import fs as pafs

    from sluice.storage.files import Storage

    root, pattern = _split_glob(source_root)
    name_filter = str((options or {}).get("pathGlobFilter") or "") or None
    prefix = root.rstrip("/")
    if start_after is not None and is_object_store_uri(root):
        listed = _objects_after(root, start_after)
    else:
        storage = Storage(root)
        start = len(storage.root.rstrip("/")) + 1
        selector = pafs.FileSelector(storage.root, allow_not_found=True, recursive=True)
        # the listing's paths are under the root it was asked for
        listed = ((info.path[start:], info.size, info.mtime_ns) for info in storage.fs.get_file_info(selector)
                  if info.type == pafs.FileType.File)
    for relative, size, mtime_ns in listed:
        if start_after is not None and relative <= start_after:  # str order is code point order, as S3's keys
            continue
        if ("/" + relative).count("/_") + ("/" + relative).count("/.") or relative.endswith("._COPYING_"):
            if any(hidden(part) for part in relative.split("/")):  # a name that may be hidden: looked at closely
                continue
        if name_filter and not fnmatch.fnmatchcase(posixpath.basename(relative), name_filter):
            continue
        uri = f"{prefix}/{relative}"
        if pattern and not fnmatch.fnmatchcase(uri, pattern):
            continue
        yield uri, size or 0, mtime_ns or 0


def _objects_after(root: str, start_after: str):
    """``(name below root, size, mtime_ns)`` of a bucket folder's objects whose name sorts after ``start_after``:
    ``ListObjectsV2`` with ``StartAfter``, the tail of the folder only."""
    from sluice.storage.object_store import ObjectStore, bucket_and_key

    bucket, key = bucket_and_key(root)
    prefix = f"{key}/" if key else ""
    pages = ObjectStore.from_env().boto3_client().get_paginator("list_objects_v2").paginate(
        Bucket=bucket, Prefix=prefix, StartAfter=prefix + start_after)
    for page in pages:
        for item in page.get("Contents", []):
            if not item["Key"].endswith("/"):  # a folder's marker
                yield item["Key"][len(prefix):], item["Size"], int(item["LastModified"].timestamp() * 1e9)


def hidden(name: str) -> bool:
    """A name Spark's file source does not read (Hadoop's ``shouldFilterOutPathName``): ``.x``, ``_x`` unless it
    is a partition folder (``_x=1``) or Parquet's ``_metadata``/``_common_metadata``, ``x._COPYING_``."""
    if name.startswith(("_common_metadata", "_metadata")):
        return False
    return (name.startswith("_") and "=" not in name) or name.startswith(".") or name.endswith("._COPYING_")


def _split_glob(path: str) -> tuple[str, str | None]:
    """A source path as the folder to list and the glob its files must match (None: every file)."""
    if not GLOB.search(path):
        return path, None
    parts = path.split("/")
    fixed = next(i for i, part in enumerate(parts) if GLOB.search(part))
    return "/".join(parts[:fixed]) or "/", path


# --- Kafka ----------------------------------------------------------------------------------------

def kafka_backlog(source: KafkaSource, checkpoint: Checkpoint, *, timeout_seconds: float = 10.0,
                  config: dict[str, str] | None = None, committed: tuple | None = None) -> dict[str, Any]:
    """Per partition, the high watermark minus where the checkpoint's last committed batch ended; ``lost``
    (only when some are): records after that end the brokers deleted (retention) before they were read.
    ``config``: the Kafka client properties the run uses (Java names, as Spark's Kafka source takes them);
    by default the spec's brokers and ``kafka.*`` options. ``committed``: ``(offsets,)``, the checkpoint's
    :meth:`~sluice.storage.checkpoint.Checkpoint.last_offset` read before; by default read here."""
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    config = dict(config or _client_config(source))
    consumer = Consumer({**_librdkafka(config), "group.id": "sluice-backlog", "enable.auto.commit": False})
    try:
        try:
            topics = consumer.list_topics(timeout=timeout_seconds).topics
        except KafkaException as err:
            raise BacklogUnknown(f"Kafka broker unreachable at {config.get('bootstrap.servers')}: {err}") from None
        wanted = _topics(source, list(topics))
        committed = checkpoint.last_offset() if committed is None else committed[0]
        partitions: dict[str, int] = {}
        lost = 0  # records after the last batch's end that the brokers deleted before they were read
        for topic in wanted:
            if topic not in topics:
                raise BacklogUnknown(f"topic {topic} does not exist on {config.get('bootstrap.servers')}")
            for partition in sorted(topics[topic].partitions):
                low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=timeout_seconds)
                start = _start(committed, source.starting_offsets, topic, partition)
                if start >= 0 and start < low:
                    lost += low - start
                start = low if start == -2 else high if start == -1 else max(start, low)
                partitions[f"{topic}/{partition}"] = max(0, high - start)
    finally:
        consumer.close()
    return {"offsets": sum(partitions.values()), "partitions": partitions, **({"lost": lost} if lost else {})}


def _client_config(source: KafkaSource) -> dict[str, str]:
    if not source.bootstrap_servers:
        raise BacklogUnknown(f"brokers in Airflow connection {source.connection!r}: see a run's backlog_after")
    config = {"bootstrap.servers": source.bootstrap_servers}
    config.update({k[len("kafka."):]: str(v) for k, v in source.options.items() if k.startswith("kafka.")})
    return config


JAAS = re.compile(r'(username|password)\s*=\s*"((?:[^"\\]|\\.)*)"')
LIBRDKAFKA_KEYS = ("bootstrap.servers", "security.protocol", "sasl.mechanism", "ssl.ca.location",
                   "ssl.endpoint.identification.algorithm")


def _librdkafka(config: dict[str, str]) -> dict[str, str]:
    """Java Kafka client properties as librdkafka (confluent-kafka) takes them: the brokers, the security
    protocol and SASL mechanism; the JAAS login's user name and password as ``sasl.username`` /
    ``sasl.password``."""
    found = {key: value for key, value in config.items() if key in LIBRDKAFKA_KEYS}
    for key, value in JAAS.findall(config.get("sasl.jaas.config", "")):
        found[f"sasl.{key}"] = value
    return found


def _topics(source: KafkaSource, existing: list[str]) -> list[str]:
    if source.topics:
        return list(source.topics)
    pattern = re.compile(source.subscribe_pattern or "")
    return sorted(t for t in existing if pattern.fullmatch(t) and not t.startswith("__"))


def _start(committed: dict[str, Any] | None, starting_offsets: str, topic: str, partition: int) -> int:
    """Where the next batch reads ``topic``/``partition`` from (-2: its earliest offset, -1: its latest): the
    end of the last committed batch; before the first run, ``starting_offsets``. A partition that appeared
    since the last batch is read from its start, as Spark does."""
    if committed is not None:
        return int((committed.get(topic) or {}).get(str(partition), -2))
    if starting_offsets in ("earliest", "latest"):
        return -2 if starting_offsets == "earliest" else -1
    return int((json.loads(starting_offsets).get(topic) or {}).get(str(partition), -2))


# --- Delta source ---------------------------------------------------------------------------------

def delta_backlog(table: str, checkpoint: Checkpoint) -> dict[str, Any]:
    """The upstream table's latest version minus the last version the checkpoint consumed (Delta's source
    offset: ``reservoirVersion`` with ``index`` -1 is a version not begun)."""
    from sluice.storage.delta_log import DeltaLog

    log = DeltaLog.open(table)
    if log is None:
        raise BacklogUnknown(f"the upstream table {table} does not exist yet (its pipeline has not run)")
    latest = log.versions()[-1]
    offset = checkpoint.last_offset()
    if not offset:
        return {"versions": latest + 1, "upstream_version": latest}
    version, index = int(offset.get("reservoirVersion", 0)), int(offset.get("index", -1))
    consumed = version - 1 if index == -1 else version
    return {"versions": max(0, latest - consumed), "upstream_version": latest}
