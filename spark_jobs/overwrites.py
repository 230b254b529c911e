"""Landing files rewritten after they were ingested (``source.on_overwrite``).

Spark's file source remembers the files it has read by path only: the checkpoint's source log
(``sources/0/<batch>``, folded every few batches into ``<batch>.compact``) holds one entry per file, its
path, the modification time Spark listed, and the batch. A file rewritten in place under the same name is
never read again, and nothing says so. Before every run sluice compares each ingested file's modification
time now with the one the log recorded (a ``stat`` per file on the driver: no Spark job) and reports the
files that differ (``overwritten_files`` in the run summary and the ledger, a warning in the task log and on
stderr). A file deleted since is not reported; a file renamed into place under a new name is new input.

``on_overwrite: reingest`` takes each new version of such a file as new input, exactly once:

1. the version is copied (a snapshot: the producer may rewrite it again) to
   ``<checkpoint>/reingest/files/<its folder>/<stem>.sluice-v<mtime>-<size><suffixes>``, written under a
   hidden name and renamed into place, so a copy is whole or absent;
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

import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote

from sluice.checkpoint import Checkpoint

REINGEST_FOLDER = "reingest"
SHOWN_PATHS = 10
"""How many of the rewritten files the run summary names (all are counted)."""

_VERSION = re.compile(r"^(?P<stem>.*?)\.sluice-v(?P<mtime>\d+)-(?P<size>\d+)(?P<suffixes>(\..*)?)$")


@dataclass(frozen=True)
class Rewritten:
    """A file the checkpoint ingested whose content changed since."""

    path: Path
    ingested_mtime_ms: int
    """The modification time the source log recorded when Spark listed the file."""
    mtime_ms: int
    size: int


def staging_folder(checkpoint: str) -> Path:
    return Path(checkpoint) / REINGEST_FOLDER / "files"


def companion_checkpoint(checkpoint: str) -> str:
    return str(Path(checkpoint) / REINGEST_FOLDER / "checkpoint")


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


def source_log(checkpoint: str, source_index: int = 0) -> list[dict]:
    """Every entry of the checkpoint's file source log: ``{"path", "timestamp", "batchId"}``."""
    return Checkpoint(checkpoint).source_log(source_index)


def _mtime_ms(stat: os.stat_result) -> int:
    # what Hadoop's local file system reports (java.io.File.lastModified: milliseconds)
    return stat.st_mtime_ns // 1_000_000


def find_rewritten(source_root: str, checkpoint: str, rereading: int | None = None) -> list[Rewritten] | None:
    """The files of the checkpoint's source log whose current version was not ingested; None when the
    source or the checkpoint is not on a local path (not checked). ``rereading``: a batch this run reads
    again (planned, not written before a crash), whose files are taken as they are now."""
    if "://" in source_root or "://" in checkpoint:
        return None
    known = ingested_versions(source_root, checkpoint)
    found = []
    for entry in source_log(checkpoint):
        path = local_file(entry["path"])
        if path is None:
            return None
        if entry["batchId"] == rereading:
            continue
        try:
            stat = os.stat(path)
        except FileNotFoundError:  # deleted (or moved away) after it was ingested: not an overwrite
            continue
        mtime = _mtime_ms(stat)
        if mtime == entry["timestamp"] or (mtime, stat.st_size) in known.get(Path(path), ()):
            continue
        found.append(Rewritten(Path(path), entry["timestamp"], mtime, stat.st_size))
    return sorted(found, key=lambda r: str(r.path))


def _copy_name(source_root: Path, rewritten: Rewritten) -> Path:
    """Where a version's copy goes, relative to the staging folder: the file's folder under the source root
    (partition folders such as ``dt=2026-11-01`` stay), its name with the version before the suffixes."""
    try:
        relative = rewritten.path.relative_to(source_root)
    except ValueError:  # a file outside the source folder (a glob path): keep its name only
        relative = Path(rewritten.path.name)
    stem, dot, suffixes = relative.name.partition(".")
    return relative.parent / f"{stem}.sluice-v{rewritten.mtime_ms}-{rewritten.size}{dot}{suffixes}"


def _original(source_root: Path, relative_copy: Path) -> tuple[Path, int, int] | None:
    match = _VERSION.match(relative_copy.name)
    if match is None:
        return None
    original = source_root / relative_copy.parent / f"{match['stem']}{match['suffixes']}"
    return original, int(match["mtime"]), int(match["size"])


def ingested_versions(source_root: str, checkpoint: str) -> dict[Path, set[tuple[int, int]]]:
    """Versions (modification time, size) of rewritten files already taken for reingesting, by file: a copy
    waiting in the staging folder, or one the companion query's log names."""
    root, staging = Path(source_root), staging_folder(checkpoint)
    copies = [p.relative_to(staging) for p in staging.rglob("*") if p.is_file()] if staging.is_dir() else []
    for entry in source_log(companion_checkpoint(checkpoint)):
        path = local_file(entry["path"])
        if path is not None:
            try:
                copies.append(Path(path).relative_to(staging))
            except ValueError:  # a checkpoint moved from elsewhere: its copies' names still say what they were
                copies.append(Path(Path(path).name))
    known: dict[Path, set[tuple[int, int]]] = {}
    for copy in copies:
        found = _original(root, copy)
        if found is not None:
            known.setdefault(found[0], set()).add(found[1:])
    return known


def stage_copies(source_root: str, checkpoint: str, rewritten: list[Rewritten]) -> list[str]:
    """Copy each new version into the staging folder (whole, or not at all); returns the copies made. A file
    that changes while it is copied is left for the next run (the producer is still writing it)."""
    root, staging = Path(source_root), staging_folder(checkpoint)
    made = []
    for version in rewritten:
        target = staging / _copy_name(root, version)
        if target.exists():
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.parent / f".{target.name}.sluice-tmp"  # hidden: Spark's file source never lists it
        shutil.copyfile(version.path, tmp)
        after = version.path.stat()
        if (_mtime_ms(after), after.st_size) != (version.mtime_ms, version.size):
            tmp.unlink()
            continue
        tmp.replace(target)
        made.append(str(target))
    return made


def pending_copies(checkpoint: str) -> bool:
    """Whether the staging folder holds copies (from this run, or left by a run that died)."""
    staging = staging_folder(checkpoint)
    return staging.is_dir() and any(p.is_file() and not p.name.startswith(".") for p in staging.rglob("*"))


def delete_ingested_copies(checkpoint: str) -> None:
    """Delete the copies whose companion batch is committed (``commits/<n>``); their names stay in the
    companion's source log, so their versions stay known."""
    companion = Checkpoint(companion_checkpoint(checkpoint))
    done = max(companion.done(), default=-1)
    for entry in companion.source_log():
        path = local_file(entry["path"])
        if path is not None and entry["batchId"] <= done:
            Path(path).unlink(missing_ok=True)


def report(rewritten: list[Rewritten] | None, action: str) -> dict:
    """The run summary's ``overwritten_files``."""
    if rewritten is None:
        return {"checked": False, "count": 0, "paths": [], "action": action,
                "why": "the source or the checkpoint is not on a local path"}
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
