"""A run with nothing to do starts no driver.

An hourly pipeline whose landing folder got nothing new paid a whole driver for it: a JVM, a Spark session,
its query planned on a cold JVM, ~5 s of wall time and 0.5-1 GB to find nothing (``make bench`` P2), and a
hundred such pipelines pay it a hundred times an hour. The launcher (``sluice run``, the Airflow task, a job
handed to the host's driver: :func:`sluice.launch.launcher.launch`) asks :func:`check` first, under the
pipeline's lock. When the run provably has nothing to do, the launcher writes its summary (``idle_run``) and
its ledger row itself, in a fraction of a second, and starts nothing; otherwise the driver runs as ever.

A run is idle when ALL of these hold (each is read without a JVM: the checkpoint's files, the source's
listing or its brokers, the tables' logs). Anything unsure -- a file that cannot be read, a broker that does
not answer -- is not idle: the driver runs and says what it found.

* the job is an incremental run (not a dry run, a reset, a backfill or maintenance) and ``SLUICE_IDLE_RUNS``
  is ``skip`` (the default);
* the checkpoint and the table are as the pipeline's last run that ended with no error left them, with this
  very spec: its driver wrote :data:`MARKER` (:func:`remember`: the spec's digest, the last batch done, the
  table's version). A changed spec, a batch done since (a run killed after its commit), the table changed since
  (a backfill, maintenance, a write by hand): the next run starts its driver, which checks the spec against the
  table and the checkpoint, evolves the schema, reports what it finds;
* no table name in a catalog (registering it is a run's), and a source read by its path;
* the checkpoint has progress, no batch planned and not done, none of sluice's markers of a half-done step, no
  state (a stateful query's no-data batches are Spark's to decide) and no companion query's checkpoint;
* the sink table has a commit;
* the source has nothing new. Files: no file the source log does not hold (as Spark's file source and
  sluice's discovery list: every level of sub-folders, hidden names skipped, the path's glob and
  ``pathGlobFilter``), no file it holds with another modification time or size (``on_overwrite``), and with
  ``clean_source`` none left in the landing folder; a source log over :data:`LOG_BYTES` is the driver's. With
  ``source.listing: incremental`` the names after the mark the driver's listing would start from (in a bucket
  one ``StartAfter`` request), every name when it would list them all, and not idle when its full listing is
  due, which the driver records (:func:`listing_start`).
  Kafka: every partition's latest offset is where the last batch ended (and no record it has not read was
  deleted). Delta: the upstream table's latest version read to its end.

Imports neither Airflow nor PySpark.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass, field
from typing import Any

from sluice.settings import Settings
from sluice.spec import DeltaSource, FileSource, KafkaSource, PipelineSpec
from sluice.storage.checkpoint import (
    BAD_RECORDS_CHECKPOINT,
    MARKERS,
    Checkpoint,
    file_key,
    source_file,
)

MARKER = "sluice_idle.json"
"""In the checkpoint: the spec's digest, the last batch done and the table's version, as the last run that ended
well left them (written by its driver: :func:`remember`)."""
KNOWN = {"metadata", "offsets", "commits", "sources", "schemas", "sluice.json", MARKER}
"""What a checkpoint of a stateless query holds between two runs that ended well."""


@dataclass
class Verdict:
    """Whether a run is idle; ``why``: what was found (a reason to start the driver, or what proves it idle)."""

    idle: bool
    why: str
    backlog: dict[str, Any] | None = None
    facts: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0


def spec_digest(spec: PipelineSpec, settings: Settings) -> str:
    """The spec as validated, with the places it resolves to under these settings."""
    places = {"sink": spec.sink_path(settings), "checkpoint": spec.checkpoint_path(settings),
              "quarantine": spec.quarantine_table_path(settings)}
    data = spec.model_dump(mode="json")
    if isinstance(spec.source, DeltaSource) and (spec.source.pipeline or spec.source.table):
        data["source"].pop("path", None)  # the upstream's folder, resolved or not: the spec says the same
    text = json.dumps({"spec": data, "places": places}, sort_keys=True)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def remember(checkpoint: Checkpoint, spec: PipelineSpec, settings: Settings, *, batch: int | None,
             delta_version: int | None) -> None:
    """A run ended well with ``spec``, the checkpoint's last batch done and the sink table's version as given: the
    next run may be idle if they are still so. Written only when it changes (a run that found nothing writes
    nothing in the checkpoint)."""
    record = {"spec_digest": spec_digest(spec, settings), "batch": batch, "delta_version": delta_version}
    if checkpoint.read_json(MARKER) != record:
        checkpoint.write(MARKER, json.dumps(record, sort_keys=True))


def check(job: Any, spec: PipelineSpec, settings: Settings) -> Verdict:
    """Whether ``job`` (a :class:`sluice.contract.JobRequest`) of ``spec`` is idle (see the module)."""
    started = time.monotonic()
    try:
        verdict = _check(job, spec, settings)
    except Exception as err:  # noqa: BLE001 - unsure: the driver runs and reports what it finds
        verdict = Verdict(False, f"not checked: {type(err).__name__}: {err}")
    verdict.seconds = round(time.monotonic() - started, 3)
    return verdict


def _check(job: Any, spec: PipelineSpec, settings: Settings) -> Verdict:
    if settings.idle_runs != "skip":
        return Verdict(False, "SLUICE_IDLE_RUNS=run")
    if job.kind != "run" or job.mode != "incremental":
        return Verdict(False, f"not an incremental run ({job.mode})")
    if spec.table_name(settings) or spec.quarantine_table_name(settings):
        return Verdict(False, "its tables have names in the catalog")
    digest = spec_digest(spec, settings)
    source = spec.source
    if isinstance(source, DeltaSource):
        from sluice.spec.catalog import resolve_upstream

        spec = resolve_upstream(spec, settings)
        source = spec.source
        if not source.path:
            return Verdict(False, "its upstream table is looked up by name")
    if isinstance(source, KafkaSource):
        from sluice.operations.backlog import LIBRDKAFKA_KEYS

        if not (source.bootstrap_servers and (source.topics or source.subscribe_pattern)):
            return Verdict(False, "its brokers are in an Airflow connection")
        java_only = sorted(k for k in source.options if k.startswith("kafka.")
                           and k[len("kafka."):] not in (*LIBRDKAFKA_KEYS, "sasl.jaas.config"))
        if java_only:  # e.g. a JKS trust store: only the driver's Java client connects with it
            return Verdict(False, f"its Kafka client needs {', '.join(java_only)}")
    checkpoint = Checkpoint(spec.checkpoint_path(settings))
    marker = checkpoint.read_json(MARKER)
    if not isinstance(marker, dict):
        return Verdict(False, f"no run that ended well recorded itself ({MARKER})")
    if marker.get("spec_digest") != digest:
        return Verdict(False, "its last run that ended well had another spec")
    names = {entry.name for entry in checkpoint.files.list() if not entry.name.startswith(".")}
    extra = sorted(names - KNOWN)
    if extra or BAD_RECORDS_CHECKPOINT in names or any(m in names for m in MARKERS):
        return Verdict(False, f"its checkpoint holds {', '.join(extra)}")
    query = checkpoint.recorded_query() or {}
    if query.get("stateful_query") or query.get("watermark"):
        return Verdict(False, "a stateful query")
    done = checkpoint.done()
    if not done:
        return Verdict(False, "no batch done yet")
    pending = checkpoint.pending_of(checkpoint.planned(), done)  # the commits listed once, above
    if pending is not None:
        return Verdict(False, f"batch {pending} is planned and not done")
    if done[-1] != marker.get("batch"):
        return Verdict(False, f"batch {done[-1]} is done since its last run that ended well")
    from sluice.storage.delta_log import DeltaLog

    log = DeltaLog.open(spec.sink_path(settings))
    versions = log.versions() if log is not None else []
    if not versions:
        return Verdict(False, "its table has no commit")
    if versions[-1] != marker.get("delta_version"):
        return Verdict(False, f"its table is at version {versions[-1]} since its last run that ended well "
                              f"(at {marker.get('delta_version')})")
    facts = {"checkpoint_id": checkpoint.query_id(), "delta_version": versions[-1], "batch": done[-1]}
    if isinstance(source, FileSource):
        return _files(spec, settings, checkpoint, facts)
    if isinstance(source, KafkaSource):
        return _kafka(source, checkpoint, facts)
    return _delta(spec, settings, checkpoint, facts)


# --- the sources --------------------------------------------------------------------------------------------

LOG_BYTES = 32 * 1024 * 1024
"""A source log larger than this (~250,000 files of history) is not read here: over a history that long the
driver's discovery, which lists names first and keeps its index in a binary snapshot, finds "nothing new"
sooner than this process parses the log (docs/performance.md)."""


def _log_bytes(checkpoint: Checkpoint) -> int:
    """The bytes of the source log a listing is compared with: the latest compact file and the batches after it."""
    sizes = {e.name: e.size for e in checkpoint.files.list("sources", "0") if e.is_file}
    compacts = [int(n[:-len(".compact")]) for n in sizes if n.endswith(".compact") and n[:-len(".compact")].isdigit()]
    last = max(compacts, default=-1)
    return (sizes.get(f"{last}.compact", 0) if compacts else 0) + sum(
        size for name, size in sizes.items() if name.isdigit() and int(name) > last)


def _files(spec: PipelineSpec, settings: Settings, checkpoint: Checkpoint, facts: dict[str, Any]) -> Verdict:
    from sluice.operations.backlog import source_files

    source = spec.source
    log_bytes = _log_bytes(checkpoint)
    if log_bytes > LOG_BYTES:
        return Verdict(False, f"a source log of {log_bytes} bytes: its driver's discovery is quicker")
    known: dict[str, tuple[int, int | None]] = {}
    for entry in checkpoint.source_log():
        path = source_file(entry["path"])
        if path is None:
            return Verdict(False, f"a source file sluice does not list: {entry['path']}")
        known[file_key(path)] = (int(entry.get("timestamp", -1)), entry.get("size"))
    start_after = None
    if source.listing == "incremental" and source.clean_source is None:  # clean_source: every file left counts
        start_after, why = listing_start(checkpoint, spec.source_path(settings), source)
        if why == FULL_LISTING_DUE:  # the driver's: it records when the full listing was made
            return Verdict(False, why)
        facts.update(start_after=start_after)  # None: every name listed here, as the driver would
    listed = present = 0
    for uri, size, mtime_ns in source_files(spec.source_path(settings), source.options, start_after=start_after):
        listed += 1
        seen = known.get(file_key(uri))
        if seen is None:
            return Verdict(False, f"a new file: {uri}", {"source": "files", "files": 1})
        if seen[0] != mtime_ns // 1_000_000 or (seen[1] is not None and seen[1] != size):
            return Verdict(False, f"a file changed since it was read: {uri}")
        present += 1
    if source.clean_source is not None and present:
        return Verdict(False, f"{present} files to clean (source.clean_source)")
    backlog = {"source": "files", "files": 0, "bytes": 0, "oldest_at": None}
    facts.update(files_known=len(known), files_listed=listed)
    return Verdict(True, f"no new or changed file among {listed} listed ({len(known)} read before)", backlog, facts)


FULL_LISTING_DUE = "a full listing is due (full_listing_every): the driver lists every name"


def listing_start(checkpoint: Checkpoint, source_root: str, source: FileSource, *,
                  now_ms: int | None = None) -> tuple[str | None, str]:
    """The name a run's incremental listing starts after, and why (None: the run lists every name): the rule of
    the driver's discovery (jvm/files ``Listing.plan``) on the marks its index wrote (``sources/0/index/marks``).
    A full listing that is due (:data:`FULL_LISTING_DUE`) is the driver's: it records when it was made."""
    from sluice.spec.common import duration_seconds

    marks = checkpoint.files.read_text("sources", "0", "index", "marks")
    marks = json.loads(marks) if marks else {}
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    root = source_root.rstrip("/")  # as Hadoop qualifies it: file:/a/b, s3a://bucket/a
    root = f"file:{root.removeprefix('file://')}" if "://" not in root or root.startswith("file://") else root
    if not marks.get("marks"):
        return None, "no mark yet: every name"
    if marks.get("root") != root:
        return None, f"the marks are for another folder ({marks.get('root')}): every name"
    if now_ms - int(marks.get("full_ms", -1)) >= duration_seconds(source.full_listing_every) * 1000 or \
            int(marks.get("full_ms", -1)) < 0:
        return None, FULL_LISTING_DUE
    old_enough = [name for at, name in marks["marks"] if at <= now_ms - duration_seconds(source.look_back) * 1000]
    if not old_enough:
        return None, "no mark look_back old yet: every name"
    return old_enough[-1], "after the mark of a listing look_back old or more"


def _kafka(source: KafkaSource, checkpoint: Checkpoint, facts: dict[str, Any]) -> Verdict:
    from sluice.operations.backlog import kafka_backlog

    backlog = kafka_backlog(source, checkpoint, timeout_seconds=5.0)
    if backlog["offsets"] or backlog.get("lost"):
        return Verdict(False, f"{backlog['offsets']} offsets wait", {"source": "kafka", **backlog})
    facts.update(partitions=len(backlog["partitions"]))
    return Verdict(True, f"every partition's latest offset ({len(backlog['partitions'])}) was read before",
                   {"source": "kafka", **backlog}, facts)


END_INDEX = 2**63 - 1 - 100
"""Delta's source offset index of a version read to its end (``DeltaSourceOffset.END_INDEX``)."""


def _delta(spec: PipelineSpec, settings: Settings, checkpoint: Checkpoint, facts: dict[str, Any]) -> Verdict:
    """Idle when the last batch's end offset is the end of the upstream table's latest version: that version
    read to its end, or the next one not begun (Delta's offset: ``reservoirVersion``, ``index``)."""
    from sluice.storage.delta_log import DeltaLog

    log = DeltaLog.open(spec.source_path(settings))
    if log is None or not log.versions():
        return Verdict(False, "its upstream table has no commit")
    latest = log.versions()[-1]
    offset = checkpoint.last_offset() or {}
    version, index = int(offset.get("reservoirVersion", -2)), int(offset.get("index", 0))
    read_to_end = (version == latest + 1 and index == -1) or (version == latest and index == END_INDEX)
    backlog = {"source": "delta", "versions": 0 if read_to_end else max(1, latest - version + 1),
               "upstream_version": latest}
    if not read_to_end or offset.get("isStartingVersion"):
        return Verdict(False, f"the upstream table is at version {latest}, its last batch ended at {offset}", backlog)
    facts.update(upstream_version=latest)
    return Verdict(True, f"the upstream table's version {latest} was read to its end", backlog, facts)
