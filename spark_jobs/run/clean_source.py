"""Archiving or deleting ingested landing files (``source.clean_source``), after a run that succeeded.

Spark's own ``cleanSource`` option is not used: it cleans a file when the *source* commits the batch that
read it, knowing nothing of the Delta table, of sluice's companion queries or of a retention, and it
requires the archive to sit where the source's glob cannot match it. sluice cleans after the query ended,
under the pipeline's lock, from what is committed on disk:

* the **candidates** are the entries of the checkpoint's file source log whose batch is marked done in
  ``commits/`` AND whose transaction the sink table has (its ``txnVersion`` for the pipeline's ``txnAppId``
  is at least the batch: the rows are in the table, even if someone rolled the table back since), not the
  batch a crash left between its sink commit and its quarantine rows; with a stateful query over parsed
  records, also taken by the companion query that sets their bad records aside (its own checkpoint);
* a candidate is cleaned once its batch was marked done ``retention`` ago (the commit file's modification
  time; a batch whose commit file Spark has dropped was done before the oldest one kept, which then bounds
  it: never early), and only while the file is the version that was ingested (same modification time as the
  log recorded: a file rewritten since is left where it is, and counted);
* **archive** moves it to ``archive_dir`` under the same path below the source folder: a rename on local
  disk; otherwise a copy (on local disk to a hidden name renamed into place: the archived file is whole or
  absent), then the delete of the original. **delete** deletes it.

Every step is restartable: a kill -9 between any two file operations leaves each file in the source
folder or in the archive (or both, between the copy and the delete); the next run sees the archived copy,
checks it has the original's size, and deletes the original. A file gone from the source folder (cleaned
before, or removed by hand) is nothing to do. Never in a dry run or a backfill (the runner does not call it).
"""

from __future__ import annotations

import posixpath
import time
from collections.abc import Callable
from dataclasses import dataclass

from sluice.settings import Settings
from sluice.spec import (
    FileSource,
    PipelineSpec,
)
from sluice.storage.checkpoint import (
    BAD_RECORDS_CHECKPOINT,
    Checkpoint,
    file_key,
    source_file,
)
from sluice.storage.files import Storage
from spark_jobs.sources.archive import (
    SHOWN_PATHS,
    CleanSourceError,
    _relative,
    check_folders,
    source_root,
)
from spark_jobs.sources.overwrites import _copy, _Files, _same_time

Step = Callable[[str, str], None]
"""Called after each file operation (``"moved"``, ``"copied"``, ``"deleted"``, and the file): tests stop a
cleaning there, as a kill -9 would."""


@dataclass(frozen=True)
class Candidate:
    """An ingested file whose batch is committed in the table and the checkpoint."""

    path: str
    """A local path, or the object's URI."""
    batch: int
    logged_mtime_ms: int
    """The modification time Spark's source log recorded when it listed the file."""
    committed_at: float | None
    """When its batch was marked done (epoch seconds); None: not known, so not cleaned yet."""


def committed_files(spec: PipelineSpec, checkpoint: str, table: str) -> list[Candidate]:
    """The files the checkpoint ingested in batches committed in the table AND the checkpoint (see the
    module's docstring); each with when its batch was marked done."""
    from spark_jobs.quality.quarantine import quarantine_pending
    from spark_jobs.sinks.delta_table import txn_version
    from spark_jobs.sinks.table import txn_app_id

    cp = Checkpoint(checkpoint)
    done, query_id = cp.done(), cp.query_id()
    if not done or query_id is None:
        return []
    through = done[-1]
    pending = quarantine_pending(None, checkpoint)
    if pending is not None:
        through = min(through, pending - 1)
    in_table = txn_version(table, txn_app_id(spec.identity, query_id))
    if in_table is None:
        return []
    through = min(through, in_table)
    if through < 0:
        return []
    companion = None
    if spec.is_stateful() and spec.parses_records():
        # the companion query reads the same folder for the bad records (spark_jobs.run.runner)
        side = cp.child(BAD_RECORDS_CHECKPOINT)
        side_done = side.done()
        companion = {file_key(p) for e in (side.source_log(through=side_done[-1]) if side_done else [])
                     if (p := source_file(e["path"])) is not None}
    times = cp.commit_times()
    oldest = min(times) if times else None
    found = []
    for entry in cp.source_log(through=through):
        path = source_file(entry["path"])
        if path is None:
            raise CleanSourceError(
                f"source.clean_source: the source log names {entry['path']}, on a file system sluice does not "
                "move or delete files on itself (local disk and s3a:// buckets only); remove clean_source"
            )
        if companion is not None and file_key(path) not in companion:
            continue
        batch = int(entry["batchId"])
        committed_at = times.get(batch)
        if committed_at is None and oldest is not None and batch < oldest:
            committed_at = times[oldest]  # dropped by Spark: done no later than the oldest commit kept
        found.append(Candidate(path, batch, int(entry["timestamp"]), committed_at))
    return found


def clean(spec: PipelineSpec, settings: Settings, checkpoint: str, table: str, *, now: float | None = None,
          on_step: Step | None = None) -> dict:
    """Archive or delete the ingested files whose retention has passed; returns the run summary's
    ``cleaned_files``. Raises :class:`CleanSourceError` (or the file system's error) when a file cannot be
    cleaned: whatever was done stays done, and the next run goes on from there."""
    source = spec.source
    assert isinstance(source, FileSource) and source.clean_source is not None
    options = source.clean_source
    check_folders(spec, settings)
    now = time.time() if now is None else now
    root = source_root(spec, settings)
    archive = Storage(spec.archive_path(settings)) if options.mode == "archive" else None
    files = _Files(root)
    report: dict = {"mode": options.mode, "retention": options.retention,
                    **({"archive_dir": archive.uri} if archive else {}),
                    "count": 0, "paths": [], "waiting": 0, "skipped": 0, "skipped_paths": {}}

    def skip(path: str, why: str) -> None:
        report["skipped"] += 1
        if len(report["skipped_paths"]) < SHOWN_PATHS:
            report["skipped_paths"][path] = why

    for candidate in committed_files(spec, checkpoint, table):
        current = files.version(candidate.path)
        if current is None:
            continue  # cleaned before (or removed by hand): nothing to do
        if candidate.committed_at is None or now - candidate.committed_at < options.retention_seconds:
            report["waiting"] += 1
            continue
        if not _same_time(current[0], candidate.logged_mtime_ms, files.on_store):
            # landed again under the same name, or rewritten: not what the table holds
            skip(candidate.path, "rewritten after it was ingested (its new content is not in the table)")
            continue
        relative = _relative(candidate.path, root)
        if archive is not None and archive.is_file(relative):
            if archive.info(relative).size != current[1]:
                skip(candidate.path, f"the archive holds another file of that name ({archive.uri_of(relative)})")
                continue
            # a cleaning cut short between the copy and the delete: the archive holds the file already
            _delete(candidate.path, on_step)
        elif archive is None:
            _delete(candidate.path, on_step)
        else:
            _archive(candidate.path, archive, relative, on_step)
        _cleaned(report, candidate.path)
    return report


def _cleaned(report: dict, path: str) -> None:
    report["count"] += 1
    if len(report["paths"]) < SHOWN_PATHS:
        report["paths"].append(path)


def _delete(path: str, on_step: Step | None) -> None:
    Storage(path).delete()
    if on_step is not None:
        on_step("deleted", path)


def _archive(path: str, archive: Storage, relative: str, on_step: Step | None) -> None:
    """Move one file into the archive: a rename when both are on local disk (atomic); otherwise a whole copy
    first (a hidden name renamed into place on disk, one put in a bucket), then the delete of the original."""
    original = Storage(path)
    target = archive.path(relative)
    archive.fs.create_dir(posixpath.dirname(target), recursive=True)
    if original.local and archive.local:
        try:
            archive.fs.move(original.root, target)
        except OSError:
            if not original.is_file():
                raise
            moved = False  # another device (EXDEV): copy, then delete
        else:
            moved = True
        if moved:
            if on_step is not None:
                on_step("moved", path)
            return
    if archive.local:
        folder, name = posixpath.split(relative)
        hidden = posixpath.join(folder, f".{name}.sluice-tmp")
        _copy(path, archive, hidden)
        archive.move(hidden, relative)
    else:
        _copy(path, archive, relative)  # an object store's put (or server-side copy) is whole or absent
    if on_step is not None:
        on_step("copied", path)
    _delete(path, on_step)


