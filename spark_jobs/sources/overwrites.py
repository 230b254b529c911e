"""Landing files rewritten after they were ingested (``source.on_overwrite``).

Spark's file source remembers the files it has read by path only: the checkpoint's source log
(``sources/0/<batch>``, folded every few batches into ``<batch>.compact``) holds one entry per file, its
path, the modification time Spark listed, and the batch. A file rewritten in place under the same name is
never read again, and nothing says so. Before every run sluice compares each ingested file's modification
time now with the one the log recorded (a ``stat`` per file on the driver: no Spark job) and reports the
files that differ (``overwritten_files`` in the run summary and the ledger, a warning in the task log and on
stderr). A file deleted since is not reported; a file renamed into place under a new name is new input.

In a bucket (``s3a://``) the modification time is the object's Last-Modified, which S3 keeps to the second:
the source folder is listed once (no request per file) and the times are compared to the second, so an object
rewritten within the same second as the version Spark listed is not seen (land corrections under new names).

``on_overwrite: reingest`` takes each new version of such a file as new input, exactly once:

1. the version is copied (a snapshot: the producer may rewrite it again) to
   ``<checkpoint>/reingest/files/<its folder>/<stem>.sluice-v<mtime>-<size><suffixes>``, written under a
   hidden name and renamed into place (in a bucket: one server-side copy), so a copy is whole or absent;
2. a companion query with its own checkpoint (``<checkpoint>/reingest/checkpoint``) reads that folder
   through the pipeline's reader, transform, quarantine and expectations into the same tables, as
   idempotent transactions of its own (``<app id>-reingest``): its source log takes each copy once, and a
   replay after a crash writes nothing twice;
3. once the companion has committed a copy's batch the copy is deleted; the companion's source log keeps
   its name, so the version is known as done.

A version is new when its modification time differs from the log's and no copy of it (present, or named in
the companion's log) exists: the same version is never copied, or ingested, twice.
"""

from __future__ import annotations

import json
import os
import posixpath
import re
from dataclasses import dataclass

from pyarrow import fs as pafs

from sluice.storage.checkpoint import (  # noqa: F401 - local_file: named here too
    Checkpoint,
    file_key,
    local_file,
    source_file,
    source_folder,
)
from sluice.storage.files import Storage, is_local_uri

REINGEST_FOLDER = "reingest"
SHOWN_PATHS = 10
"""How many of the rewritten files the run summary names (all are counted)."""

_VERSION = re.compile(r"^(?P<stem>.*?)\.sluice-v(?P<mtime>\d+)-(?P<size>\d+)(?P<suffixes>(\..*)?)$")


@dataclass(frozen=True)
class Rewritten:
    """A file the checkpoint ingested whose content changed since."""

    path: str
    """A local path, or the object's URI (``s3a://bucket/key``)."""
    ingested_mtime_ms: int
    """The modification time the source log recorded when Spark listed the file."""
    mtime_ms: int
    size: int


def staging_folder(checkpoint: str) -> str:
    return Storage(checkpoint).uri_of(REINGEST_FOLDER, "files")


def companion_checkpoint(checkpoint: str) -> str:
    return Storage(checkpoint).uri_of(REINGEST_FOLDER, "checkpoint")


def source_log(checkpoint: str, source_index: int = 0) -> list[dict]:
    """Every entry of the checkpoint's file source log: ``{"path", "timestamp", "batchId"}``."""
    return Checkpoint(checkpoint).source_log(source_index)


def _mtime_ms(stat: os.stat_result) -> int:
    # what Hadoop's local file system reports (java.io.File.lastModified: milliseconds)
    return stat.st_mtime_ns // 1_000_000


def _same_time(now_ms: int, logged_ms: int, on_store: bool) -> bool:
    """Whether a file's modification time now is the one the log recorded: to the millisecond on disk, to the
    second in a bucket (Last-Modified is kept to the second; a listing and a HEAD may round it apart)."""
    return now_ms // 1000 == logged_ms // 1000 if on_store else now_ms == logged_ms


class _Files:
    """The current version (modification time in ms, size) of source files: a ``stat`` each on local disk;
    in a bucket, one recursive listing of the source folder (a HEAD for a file outside it)."""

    def __init__(self, source_root: str) -> None:
        self.root = source_root.rstrip("/")
        self.on_store = not is_local_uri(source_root)
        self._listed: dict[str, tuple[int, int]] | None = None

    def version(self, path: str) -> tuple[int, int] | None:
        """None when the file is not there (deleted or moved away)."""
        if not self.on_store:
            try:
                stat = os.stat(path)
            except FileNotFoundError:
                return None
            return _mtime_ms(stat), stat.st_size
        if path.startswith(self.root + "/"):
            if self._listed is None:
                self._listed = self._list()
            return self._listed.get(path)
        info = Storage(path).info()
        return None if info.type != pafs.FileType.File else (info.mtime_ns // 1_000_000, info.size or 0)

    def _list(self) -> dict[str, tuple[int, int]]:
        storage = Storage(self.root)
        selector = pafs.FileSelector(storage.root, allow_not_found=True, recursive=True)
        return {f"{self.root}/{posixpath.relpath(i.path, storage.root)}": ((i.mtime_ns or 0) // 1_000_000, i.size or 0)
                for i in storage.fs.get_file_info(selector) if i.type == pafs.FileType.File}


def find_rewritten(source_root: str, checkpoint: str, rereading: int | None = None) -> list[Rewritten] | None:
    """The files of the checkpoint's source log whose current version was not ingested; None when the
    source is on a file system sluice does not read itself (not checked). ``rereading``: a batch this run
    reads again (planned, not written before a crash), whose files are taken as they are now."""
    entries = source_log(checkpoint)
    if not entries:
        return []
    known = ingested_versions(source_root, checkpoint)
    files = _Files(source_root)
    found = []
    for entry in entries:
        path = source_file(entry["path"])
        if path is None:
            return None
        if entry["batchId"] == rereading:
            continue
        current = files.version(path)
        if current is None:  # deleted (or moved away) after it was ingested: not an overwrite
            continue
        mtime, size = current
        if _same_time(mtime, entry["timestamp"], files.on_store) or current in known.get(file_key(path), ()):
            continue
        found.append(Rewritten(path, entry["timestamp"], mtime, size))
    return sorted(found, key=lambda r: r.path)


def find_rewritten_indexed(spark, source_root: str, checkpoint: str, options: dict, *,
                           rereading: int | None = None, listed: dict | None = None,
                           listing: str = "full") -> list[Rewritten]:
    """:func:`find_rewritten` for ``source.discovery: index``: one listing of the source path with the files'
    statuses, against the times the index recorded (jvm/files ``Rewrites``), without the log's text parsed:
    the files under the source path (a file the index found that is no longer there is not a rewrite).
    ``listed``: that listing's answer already (:func:`list_indexed`, taken earlier in the run). ``listing``: the
    source's (``FileSource.listing_option``): with ``incremental``, the names after its mark are looked at."""
    found = (listed or list_indexed(spark, source_root, checkpoint, options, listing=listing))["rewritten"]
    if not found:
        return []
    again = {file_key(path) for uri in (Checkpoint(checkpoint).files_of_batch(rereading) or [])
             if (path := source_file(uri)) is not None} if rereading is not None else set()
    known = ingested_versions(source_root, checkpoint)
    rewritten = []
    for r in found:
        path = source_file(r["path"])
        if path is None or file_key(path) in again or (r["mtime_ms"], r["size"]) in known.get(file_key(path), ()):
            continue
        rewritten.append(Rewritten(path, r["ingested_ms"], r["mtime_ms"], r["size"]))
    return sorted(rewritten, key=lambda r: r.path)


def list_indexed(spark, source_root: str, checkpoint: str, options: dict, *, hand_over: bool = False,
                 any_unseen=None, found=None, listing: str = "full") -> dict:
    """The listing behind :func:`find_rewritten_indexed` (jvm/files ``Rewrites.check``): ``rewritten``, the
    files whose time is not the one the index recorded, and ``unseen``, how many files it found that the index
    has not (-1: an empty index, nothing listed). Reads only: safe on a thread of its own before the query.
    ``hand_over``: those new files are the first listing of the query's source of this checkpoint (the folder
    walked once a run; ``listed_before_query`` in its discovery report). The JVM ``CompletableFuture``
    objects it completes: ``any_unseen`` with true as soon as it meets a new file (else false at its end),
    ``found`` with ``unseen`` once the new files are known and handed over (-1: an empty index or a failed
    listing); on a local disk with a large index, before the times of the files ingested before are looked
    at."""
    glob_filter = next((str(v) for k, v in options.items() if k.lower() == "pathglobfilter"), None)
    return json.loads(spark._jvm.dev.sluice.files.Rewrites.check(
        spark._jsparkSession, source_folder(checkpoint), source_root, glob_filter, listing,
        not is_local_uri(source_root),
        hand_over, any_unseen, found))


def _relative(path: str, root: str) -> str:
    root = root.rstrip("/")
    if "://" not in root:
        path, root = posixpath.normpath(path), posixpath.normpath(root)
    return path[len(root) + 1:] if path.startswith(root + "/") else posixpath.basename(path)


def _copy_name(source_root: str, rewritten: Rewritten) -> str:
    """Where a version's copy goes, relative to the staging folder: the file's folder under the source root
    (partition folders such as ``dt=2026-11-01`` stay; a file outside the source folder, a glob path, keeps its
    name only), its name with the version before the suffixes."""
    relative = _relative(rewritten.path, source_root)
    folder, name = posixpath.split(relative)
    stem, dot, suffixes = name.partition(".")
    return posixpath.join(folder, f"{stem}.sluice-v{rewritten.mtime_ms}-{rewritten.size}{dot}{suffixes}")


def _original(source_root: str, relative_copy: str) -> tuple[str, int, int] | None:
    folder, name = posixpath.split(relative_copy)
    match = _VERSION.match(name)
    if match is None:
        return None
    original = posixpath.join(source_root.rstrip("/"), folder, f"{match['stem']}{match['suffixes']}")
    return file_key(original), int(match["mtime"]), int(match["size"])


def ingested_versions(source_root: str, checkpoint: str) -> dict[str, set[tuple[int, int]]]:
    """Versions (modification time, size) of rewritten files already taken for reingesting, by file: a copy
    waiting in the staging folder, or one the companion query's log names."""
    staging = staging_folder(checkpoint)
    copies = [relative for relative, _size in Storage(staging).walk_files()]
    for entry in source_log(companion_checkpoint(checkpoint)):
        path = source_file(entry["path"])
        if path is not None:  # a checkpoint moved from elsewhere: its copies' names still say what they were
            copies.append(_relative(path, staging))
    known: dict[str, set[tuple[int, int]]] = {}
    for copy in copies:
        found = _original(source_root, copy)
        if found is not None:
            known.setdefault(found[0], set()).add(found[1:])
    return known


def stage_copies(source_root: str, checkpoint: str, rewritten: list[Rewritten]) -> list[str]:
    """Copy each new version into the staging folder (whole, or not at all); returns the copies made. A file
    that changes while it is copied is left for the next run (the producer is still writing it)."""
    staging = Storage(staging_folder(checkpoint))
    on_store = not is_local_uri(source_root)
    made = []
    for version in rewritten:
        relative = _copy_name(source_root, version)
        if staging.exists(relative):
            continue
        folder, name = posixpath.split(relative)
        hidden = posixpath.join(folder, f".{name}.sluice-tmp")  # hidden: Spark's file source never lists it
        _copy(version.path, staging, hidden)
        after = _Files(source_root).version(version.path)
        if after is None or after[1] != version.size or not _same_time(after[0], version.mtime_ms, on_store):
            staging.delete(hidden)
            continue
        staging.move(hidden, relative)  # a rename on disk; in a bucket a server-side copy, then a delete
        made.append(staging.uri_of(relative))
    return made


def _copy(path: str, staging: Storage, relative: str) -> None:
    """A file copied to ``relative`` under ``staging``: streamed on disk, a server-side copy within one store,
    read and written whole between the two."""
    source = Storage(path)
    staging.fs.create_dir(posixpath.dirname(staging.path(relative)), recursive=True)
    if (source.local and staging.local) or source.fs is staging.fs:
        staging.fs.copy_file(source.root, staging.path(relative))
        return
    with source.fs.open_input_stream(source.root) as stream:
        staging.write_bytes(relative, stream.read())


def pending_copies(checkpoint: str) -> bool:
    """Whether the staging folder holds copies (from this run, or left by a run that died)."""
    return any(not posixpath.basename(relative).startswith(".")
               for relative, _size in Storage(staging_folder(checkpoint)).walk_files())


def delete_ingested_copies(checkpoint: str) -> None:
    """Delete the copies whose companion batch is committed (``commits/<n>``); their names stay in the
    companion's source log, so their versions stay known."""
    companion = Checkpoint(companion_checkpoint(checkpoint))
    done = max(companion.done(), default=-1)
    for entry in companion.source_log():
        path = source_file(entry["path"])
        if path is not None and entry["batchId"] <= done:
            Storage(path).delete()


def report(rewritten: list[Rewritten] | None, action: str) -> dict:
    """The run summary's ``overwritten_files``."""
    if rewritten is None:
        return {"checked": False, "count": 0, "paths": [], "action": action,
                "why": "the source is on a file system sluice does not read itself"}
    return {"checked": True, "count": len(rewritten), "paths": [str(r.path) for r in rewritten[:SHOWN_PATHS]],
            "action": action}


def fail_message(rewritten: list[Rewritten]) -> str:
    shown = "; ".join(
        f"{r.path} (ingested as modified at {r.ingested_mtime_ms} ms, now {r.mtime_ms} ms, {r.size} bytes)"
        for r in rewritten[:SHOWN_PATHS]
    )
    more = f" and {len(rewritten) - SHOWN_PATHS} more" if len(rewritten) > SHOWN_PATHS else ""
    return (
        f"source.on_overwrite: fail: {len(rewritten)} landing file(s) were rewritten after they were ingested: "
        f"{shown}{more}. Nothing was written and the checkpoint did not advance. Options: set "
        "source.on_overwrite: reingest (each new version is ingested once; use sink.mode merge with keys so "
        "corrected rows replace the old ones), or warn (go on without their new content); land corrections "
        "under a new file name in future."
    )
