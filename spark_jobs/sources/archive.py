"""Where a pipeline's landing files are kept and where they went: the source folder's root, and the
``source.clean_source`` archive (``archive_dir``) -- what a backfill reads and a reset must not lose.

The cleaning itself runs after a run (:mod:`spark_jobs.run.clean_source`); this module is what the sources'
readers need of it: where each ingested file is now, and the refusals when files are gone."""

from __future__ import annotations

import posixpath

from sluice.settings import Settings
from sluice.spec import (
    FileSource,
    PipelineSpec,
    archive_overlap_message,
    overlapping_folders,
)
from sluice.storage.checkpoint import Checkpoint, source_file
from sluice.storage.files import Storage
from spark_jobs.driver.errors import BackfillRefused, GuardRefused
from spark_jobs.sources.overwrites import _Files

SHOWN_PATHS = 10
"""How many of the cleaned (and of the skipped) files the run summary names (all are counted)."""

class CleanSourceError(RuntimeError):
    """The files cannot be cleaned as the spec says; the message says what to fix."""


def source_root(spec: PipelineSpec, settings: Settings) -> str:
    """The folder the files' paths are kept relative to in the archive: the source folder, or for a glob
    path the folders before its first wildcard."""
    from sluice.operations.backlog import GLOB

    path = spec.source_path(settings)
    if not GLOB.search(path):
        return path.rstrip("/")
    parts = path.split("/")
    fixed = next(i for i, part in enumerate(parts) if GLOB.search(part))
    return "/".join(parts[:fixed]) or "/"


def check_folders(spec: PipelineSpec, settings: Settings) -> None:
    """Refuse an archive folder that is the source folder, inside it or holding it, as resolved for this run
    (the spec check cannot compare a relative folder with an absolute one)."""
    archive = spec.archive_path(settings)
    if archive is not None and overlapping_folders(archive, source_root(spec, settings)):
        raise CleanSourceError(f"source.{archive_overlap_message(archive, source_root(spec, settings))}")


def _relative(path: str, root: str) -> str:
    """The file's path below the source folder (a file outside it keeps its name only)."""
    if "://" not in root:
        path, root = posixpath.normpath(path), posixpath.normpath(root)
    root = root.rstrip("/")
    return path[len(root) + 1:] if path.startswith(root + "/") else posixpath.basename(path)


def locate_for_backfill(spec: PipelineSpec, settings: Settings, files: list[str]) -> list[str]:
    """A backfill reads the files the checkpoint ingested for its slice: each from the source folder, or,
    once archived, from ``archive_dir`` (same path below it). Refuses, naming them, the files that are in
    neither (deleted by ``mode: delete``, or by hand): the slice cannot be rebuilt whole."""
    root = source_root(spec, settings)
    archive_uri = spec.archive_path(settings)
    archive = Storage(archive_uri) if archive_uri else None
    found, gone = [], []
    for logged in files:
        path = source_file(logged)
        if path is None or Storage(path).is_file():
            found.append(logged)
            continue
        relative = _relative(path, root)
        if archive is not None and archive.is_file(relative):
            found.append(archive.uri_of(relative))
        else:
            gone.append(path)
    if gone:
        shown = ", ".join(gone[:SHOWN_PATHS]) + (f" and {len(gone) - SHOWN_PATHS} more" if len(gone) > SHOWN_PATHS else "")
        where = (f"neither in the source folder nor in source.clean_source.archive_dir ({archive.uri})" if archive
                 else "no longer in the source folder")
        raise BackfillRefused(
            f"{len(gone)} file(s) the slice was ingested from are {where}: {shown} "
            f"(source.clean_source: {spec.source.clean_source.mode}). The table was not changed. Put the files "
            "back where they landed to backfill this slice (or backfill a slice whose files are kept); "
            "clean_source mode archive keeps files a backfill can read."
        )
    return found


def archived_folder(spec: PipelineSpec, settings: Settings, folder: str) -> bool:
    """Whether ``archive_dir`` holds the counterpart of a folder below the source folder (a backfill's day
    folder whose files were all archived: in a bucket the emptied folder is gone)."""
    archive_uri = spec.archive_path(settings)
    return archive_uri is not None and Storage(archive_uri).is_dir(_relative(folder, source_root(spec, settings)))


def refuse_reset(spec: PipelineSpec, settings: Settings, checkpoint: str) -> None:
    """A reset rebuilds the table from the files in the source folder: refuse it while files the pipeline
    ingested were cleaned away (in ``archive_dir``, or named by the old checkpoint and gone), whose rows the new
    table would lose."""
    source = spec.source
    if not isinstance(source, FileSource) or source.clean_source is None:
        return
    archive_uri = spec.archive_path(settings)
    archived = [f for f, _ in Storage(archive_uri).walk_files()] if archive_uri else []
    files = _Files(source_root(spec, settings))
    gone = [p for e in Checkpoint(checkpoint).source_log()
            if (p := source_file(e["path"])) is not None and files.version(p) is None]
    if not archived and not gone:
        return
    where = (f"{len(archived)} file(s) in its archive_dir {archive_uri}" if archived
             else f"{len(gone)} file(s) it ingested, e.g. {gone[0]}, deleted")
    raise GuardRefused(
        f"a reset of {spec.name} rebuilds its table from the files in the source folder, but source.clean_source "
        f"({source.clean_source.mode}) has cleaned {where}: the new table would lose their rows. Options: move the "
        "archived files back into the source folder (the same paths below it), then reset; or, to rebuild from "
        "what the source folder holds now, remove source.clean_source for the reset run (the old rows stay in "
        "the table's Delta history)."
    )
