"""A pipeline's checkpoint: everything sluice knows about its files, in one class.

Spark's files, read only: ``metadata`` (the query id), ``offsets/<n>`` (batches planned: a version line, the
batch's metadata, one line of JSON per source), ``commits/<n>`` (batches done), ``sources/<i>/`` (a file
source's log: ``<n>`` per batch, folded into ``<n>.compact`` every so often). sluice's own files beside them:
``sluice.json`` (the query the checkpoint belongs to) and the markers a run leaves while a step is half done
(:data:`MARKERS`). All through one :class:`sluice.storage.files.Storage`, by URI: local disk or an object store.

Ground floor: no Spark, no Airflow. A driver passes ``writer`` (Spark's CheckpointFileManager,
:mod:`spark_jobs.sinks.checkpoint_files`) so that sluice's markers are written the way Spark writes its own logs.
"""

from __future__ import annotations

import json
import posixpath
import time
import uuid
from collections.abc import Callable
from typing import Any, Protocol
from urllib.parse import unquote

from sluice.storage.files import Storage
from sluice.storage.object_store import OBJECT_STORE_SCHEMES

SPEC_FILE = "sluice.json"
QUARANTINE_PENDING = "sluice_quarantine_pending"
UPSTREAM_PENDING = "sluice_upstream_pending"
PROMOTE_PENDING = "sluice_promote_pending"
SCHEMAS = "schemas"
"""A file source without a declared schema: ``schemas/<n>``, the versions of the schema it reads with (JSON:
version, ddl, created_at, run_id, reason, files sampled), the latest one in use (:mod:`sluice.schema.stored`)."""

BAD_RECORDS_CHECKPOINT = "bad_records"
"""The checkpoint, inside the pipeline's, of the companion query that sets a stateful query's bad records aside."""
MARKERS = (QUARANTINE_PENDING, UPSTREAM_PENDING, PROMOTE_PENDING)
"""sluice's markers: a batch between its sink commit and its quarantine rows; upstream changes skipped by the
stream and not yet rebuilt; rescued values not yet moved into their new columns."""


class Writer(Protocol):
    def write_text(self, uri: str, text: str) -> None: ...
    def delete(self, uri: str) -> None: ...


class Checkpoint:
    """The checkpoint at ``uri``. Reads need nothing but the file system; ``writer`` writes sluice's files."""

    def __init__(self, uri: str, writer: Writer | None = None) -> None:
        self.uri = str(uri)
        self.files = Storage(self.uri)
        self.writer = writer

    def __repr__(self) -> str:
        return f"Checkpoint({self.uri!r})"

    def __str__(self) -> str:
        return self.uri

    def child(self, *parts: str) -> Checkpoint:
        """A checkpoint inside this one (a companion query's)."""
        return Checkpoint(self.files.uri_of(*parts), self.writer)

    def exists(self) -> bool:
        return self.files.is_dir()

    # --- Spark's files, read only ------------------------------------------------------------------------
    def query_id(self) -> str | None:
        """The streaming query id Spark keeps in ``metadata`` (None if there is none)."""
        text = self.files.read_text("metadata")
        try:
            return json.loads(text.splitlines()[0])["id"] if text else None
        except (ValueError, KeyError, IndexError):
            return None

    def ensure_query_id(self) -> str:
        """The query id, writing a new one first if there is none. Spark adopts a ``metadata`` file it finds
        (``{"id": ...}``), so the id is known, and recorded in the table, before the first batch."""
        found = self.query_id()
        if found:
            return found
        new_id = str(uuid.uuid4())
        self.files.write_text("metadata", json.dumps({"id": new_id}) + "\n")
        return new_id

    def planned(self) -> list[int]:
        """The batches planned (``offsets/<n>``), ascending."""
        return self.files.numbered("offsets")

    def done(self) -> list[int]:
        """The batches marked done (``commits/<n>``), ascending."""
        return self.files.numbered("commits")

    def commit_times(self) -> dict[int, float]:
        """When each batch still in ``commits/`` was marked done: its commit file's modification time (epoch
        seconds; an object's Last-Modified in a bucket). Spark deletes old commit files
        (``minBatchesToRetain``): an older batch was marked done no later than the oldest one kept."""
        return {int(e.name): e.mtime_ns / 1e9 for e in self.files.list("commits") if e.is_file and e.name.isdigit()}

    def has_progress(self) -> bool:
        return bool(self.planned())

    def pending_batch(self) -> int | None:
        """The batch planned but not marked done: the one a restart runs again. None if there is none."""
        return self.pending_of(self.planned(), self.done())

    @staticmethod
    def pending_of(planned: list[int], done: list[int]) -> int | None:
        """:meth:`pending_batch` of the batches planned and done, already listed (ascending)."""
        if planned and (not done or planned[-1] > done[-1]):
            return planned[-1]
        return None

    def offset_lines(self, batch: int) -> list[str] | None:
        """``offsets/<batch>``: the log version, the batch's metadata, one JSON line per source."""
        text = self.files.read_text("offsets", batch) if batch >= 0 else None
        return None if text is None else text.splitlines()

    def source_offset(self, batch: int, source_index: int = 0) -> dict[str, Any] | None:
        """The END offset of ``batch`` for one source, as JSON; None when its offsets file is gone."""
        lines = self.offset_lines(batch)
        if lines is None:
            return None
        return json.loads(lines[2 + source_index]) if len(lines) > 2 + source_index else {}

    def last_offset(self, source_index: int = 0) -> dict[str, Any] | None:
        """The END offset of the last batch done: how far the stream has read. None: no batch done yet, or
        its offsets are gone."""
        done = self.done()
        return self.source_offset(done[-1], source_index) if done else None

    def restart_offset(self, source_index: int = 0) -> dict[str, Any] | None:
        """Where a restarted query reads from: the START offset of the last batch done (Spark builds that
        batch's DataFrame again on restart, then reads on from its end); ``{}`` when that is the stream's
        very start (or its offsets are gone). None: no batch done yet."""
        done = self.done()
        if not done:
            return None
        start = self.source_offset(done[-1] - 1, source_index)
        return {} if start is None else start

    def source_log(self, source_index: int = 0, *, through: int | None = None) -> list[dict[str, Any]]:
        """The file source log's entries (``{"path", "timestamp", "batchId"}``), up to batch ``through``.

        The latest ``<n>.compact`` (at or before ``through``) holds every entry up to batch n (sluice sets
        ``maxFileAge`` to 100 years, so Spark keeps them all); the batch files after it hold the rest."""
        folder = ("sources", str(source_index))
        compacts = self.files.numbered(*folder, suffix=".compact")
        before = [n for n in compacts if through is None or n <= through]
        if compacts and not before:  # ``through`` was folded into the first compact file: it holds it all
            names = [f"{compacts[0]}.compact"]
        else:
            first = before[-1] if before else -1
            names = [f"{first}.compact"] if before else []
            names += [str(n) for n in self.files.numbered(*folder) if n > first and (through is None or n <= through)]
        entries: list[dict[str, Any]] = []
        for name in names:
            text = self.files.read_text(*folder, name) or ""
            lines = [line for line in text.splitlines()[1:] if line.strip()]  # the first line: the log's version
            entries += json.loads(f"[{','.join(lines)}]")  # one parse per file: ~4x faster than one per line
        if through is not None:
            entries = [e for e in entries if e.get("batchId", -1) <= through]
        return entries

    def files_of_batch(self, batch: int, source_index: int = 0) -> list[str] | None:
        """The files a file-source batch read (from its log file, or the compact file that folded it in).
        None when the log has no entry file for it."""
        folder = ("sources", str(source_index))
        if not self.files.is_dir(*folder):
            return None
        names = [str(batch)] + [f"{n}.compact" for n in self.files.numbered(*folder, suffix=".compact") if n >= batch]
        for name in names:
            text = self.files.read_text(*folder, name)
            if text is not None:
                return [entry["path"] for entry in map(json.loads, text.splitlines()[1:])
                        if entry.get("batchId") == batch]
        return None

    def size(self) -> dict[str, int] | None:
        """Files and bytes in the checkpoint, and the batches its offsets and commits logs still hold."""
        if not self.exists():
            return None
        files = self.files.walk_files()
        return {"files": len(files), "bytes": sum(size for _, size in files),
                "offsets": len(self.planned()), "commits": len(self.done())}

    # --- sluice's files ----------------------------------------------------------------------------------
    def read(self, name: str) -> str | None:
        return self.files.read_text(name)

    def read_json(self, name: str) -> Any:
        """A JSON file of sluice's; None when it is missing or unreadable (a half-written one never is)."""
        text = self.read(name)
        try:
            return None if text is None else json.loads(text)
        except ValueError:
            return None

    def write(self, name: str, text: str) -> None:
        """Write sluice's file whole (through the driver's writer when there is one)."""
        if self.writer is not None:
            self.writer.write_text(self.files.uri_of(name), text)
        else:
            self.files.write_text(name, text)

    def delete(self, name: str) -> None:
        if self.writer is not None:
            self.writer.delete(self.files.uri_of(name))
        else:
            self.files.delete(name)

    def schema_versions(self) -> list[int]:
        """The stored versions of the source's schema (``schemas/<n>``), ascending."""
        return self.files.numbered(SCHEMAS)

    def read_schema(self, version: int) -> dict[str, Any] | None:
        """``schemas/<version>`` as JSON; None when it is missing."""
        found = self.read_json(f"{SCHEMAS}/{version}")
        return found if isinstance(found, dict) else None

    def latest_schema(self) -> dict[str, Any] | None:
        """The schema version in use: the highest one stored; None before the first run stored one."""
        versions = self.schema_versions()
        return self.read_schema(versions[-1]) if versions else None

    def write_schema(self, record: dict[str, Any]) -> None:
        """Store ``schemas/<record["version"]>`` whole (a crash leaves the file complete or absent)."""
        if self.writer is not None and not self.files.is_dir(SCHEMAS):  # Spark's writer wants the folder there
            self.files.make_dir(SCHEMAS)
        self.write(f"{SCHEMAS}/{int(record['version'])}", json.dumps(record, indent=1))

    def recorded_query(self) -> dict[str, Any] | None:
        """What ``sluice.json`` says the checkpoint's query is (None: not recorded)."""
        found = self.read_json(SPEC_FILE)
        return found.get("query", {}) if isinstance(found, dict) else None

    def record_query(self, pipeline: str, query: dict[str, Any]) -> None:
        self.files.write_text(SPEC_FILE, json.dumps({"pipeline": pipeline, "query": query}, indent=1))

    def set_aside(self, label: str = "replaced", *, keep_one: bool = False,
                  clock: Callable[[], float] = time.time) -> str | None:
        """Move the checkpoint away, kept beside it as ``<name>.<label>-<UTC time>``; returns where it went.
        ``keep_one``: delete older checkpoints set aside with the same label first."""
        if not self.exists():
            return None
        parent_uri, name = self.uri.rstrip("/").rsplit("/", 1)
        parent = Storage(parent_uri)
        stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime(clock()))
        aside = f"{name}.{label}-{stamp}"
        if keep_one:
            for entry in parent.list():
                if entry.name.startswith(f"{name}.{label}-") and not entry.is_file:
                    parent.delete_dir(entry.name)
        parent.move(name, aside)
        return f"{parent_uri}/{aside}"


def source_folder(checkpoint: str, source_index: int = 0) -> str:
    """The folder of a checkpoint's source (``<checkpoint>/sources/0``): where Spark keeps a file source's log
    and sluice's discovery its index, spelt as Spark's query names it to the source (``metadataPath``)."""
    return f"{checkpoint.rstrip('/')}/sources/{source_index}"


def local_file(uri: str) -> str | None:
    """A source log entry's path (``file:///...``, percent-encoded) as a local path; None for other schemes.
    Called once per ingested file on every run: string slicing, not ``urlparse`` (3x the time at 10,000)."""
    if uri.startswith("file:"):
        path = uri[5:]
        if path.startswith("//"):  # file:///abs (an empty authority)
            path = path[2:]
    elif "://" in uri:
        return None
    else:
        path = uri
    return unquote(path) if "%" in path else path


def source_file(uri: str) -> str | None:
    """A source log entry's path as sluice names the file: a local path, or an object store URI (decoded);
    None for a scheme sluice does not read itself (``hdfs://``...)."""
    if uri.startswith(OBJECT_STORE_SCHEMES):
        return unquote(uri) if "%" in uri else uri
    return local_file(uri)


def file_key(path: str) -> str:
    """A source file's name as entries are compared: a normalised local path, a URI as it is."""
    return path if "://" in path else posixpath.normpath(path)
