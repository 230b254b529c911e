"""Ledger rows that could not be appended when their run ended (a full disk, a store that stopped answering),
kept on the side until an append to the same ledger succeeds: then they are appended with it, marked
``recorded_late``. A run is recorded late rather than never.

    spool = settings.ledger_spool                    # <checkpoint root>/_ledger_spool on local disk
    kept = keep(spool, ledger, summary)              # the summary, as a file of the ledger's folder in the spool
    pending(spool, ledger)                           # [(file, summary)] waiting for that ledger, oldest first
    forget(files)                                    # after they were appended

A full disk is the case to plan for: the spool is most often on the same disk as the ledger. So the spool keeps
a reserve (``RESERVE_BYTES``, made after each append that succeeded): writing a row that meets a full disk gives
the reserve up and writes the row in its place. Imports neither Airflow nor PySpark.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sluice.contract import Summary

RESERVE_BYTES = 1 << 20
"""Room kept in the spool for rows written while the disk is full: a summary is a few KB."""
RESERVE = ".reserve"


def folder_of(spool: Path, ledger: str) -> Path:
    """The spool's folder for one ledger (a spool may serve several: each folder names its ledger)."""
    return Path(spool) / hashlib.sha256(str(ledger).encode()).hexdigest()[:16]


def keep(spool: Path, ledger: str, summary: Summary) -> Path:
    """Write ``summary`` to the spool of ``ledger``; on a full disk, give the reserve up and write it again.
    Returns the file; raises OSError when even that fails."""
    folder = folder_of(spool, ledger)
    stamp = summary.started_at.replace(":", "").replace("-", "").replace("+", "Z")
    target = folder / f"{stamp}-{uuid.uuid4().hex[:8]}.json"
    text = json.dumps(summary.to_json())
    for attempt in range(2):
        try:
            folder.mkdir(parents=True, exist_ok=True)
            named = folder / "ledger.txt"
            if not named.is_file():
                named.write_text(str(ledger), encoding="utf-8")
            partial = target.with_suffix(".part")
            partial.write_text(text, encoding="utf-8")
            os.replace(partial, target)  # a file of the spool is whole, or not there
            return target
        except OSError as err:
            if err.errno not in (errno.ENOSPC, errno.EDQUOT) or attempt:
                raise
            (Path(spool) / RESERVE).unlink(missing_ok=True)
    raise AssertionError("unreachable")


def pending(spool: Path | None, ledger: str) -> list[tuple[Path, Summary]]:
    """The rows waiting for ``ledger``, oldest run first; a file that does not read as a summary is left in
    place, never dropped."""
    from sluice.contract import Summary

    if spool is None:
        return []
    folder = folder_of(spool, ledger)
    found = []
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        try:
            summary = Summary.read(path)
        except ValueError:
            continue
        if summary is not None:
            found.append((path, summary))
    return found


def forget(files: list[Path]) -> None:
    for path in files:
        path.unlink(missing_ok=True)


def ensure_reserve(spool: Path | None) -> None:
    """Make the spool's reserve if it is missing (after an append that succeeded: the disk had room)."""
    if spool is None:
        return
    reserve = Path(spool) / RESERVE
    if reserve.is_file() and reserve.stat().st_size == RESERVE_BYTES:
        return
    partial = reserve.with_suffix(".part")
    try:
        Path(spool).mkdir(parents=True, exist_ok=True)
        with partial.open("wb") as out:
            out.write(b"\0" * RESERVE_BYTES)  # written, not sparse: the blocks are really taken
        os.replace(partial, reserve)
    except OSError:  # no room for it now: the next append that succeeds tries again
        partial.unlink(missing_ok=True)
