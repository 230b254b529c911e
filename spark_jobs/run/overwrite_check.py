"""The rewritten-file check of a file source's run (``source.on_overwrite``): the landing files rewritten in
place since they were ingested, reported in ``overwritten_files``; with ``fail`` the run refused before anything
is written, with ``reingest`` each new version copied for the companion query (:mod:`spark_jobs.sources.overwrites`).

``fail`` and ``reingest`` have the check's answer before the query starts. ``warn`` only reports: when the run's
head start (:mod:`spark_jobs.run.head_start`) is listing the folder, the query starts once the listing has
handed it the new files, and the report takes the rest of the listing (the times of every file ingested before,
which grow with the folder's history) after the query, the listing having run beside it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from sluice.spec import FileSource
from sluice.storage.checkpoint import Checkpoint
from spark_jobs.driver.context import Run
from spark_jobs.run.head_start import HeadStart
from spark_jobs.sinks.table import Target
from spark_jobs.sources import overwrites
from spark_jobs.sources.files import indexed, listing_option


class OverwrittenFiles(RuntimeError):
    """``on_overwrite: fail`` and landing files were rewritten after they were ingested."""


@dataclass
class Checked:
    """What :func:`check` left for later: whether the companion query has copies to ingest, and the report
    still to take (``warn`` beside a head start)."""

    reingest: bool = False
    report: Callable[[], None] | None = None

    def finish(self, quietly: bool = False) -> None:
        """The report taken, when one was left for after the query: its listing waited for. ``quietly``: a
        failed listing leaves no report (the run failed already)."""
        report, self.report = self.report, None
        try:
            if report is not None:
                report()
        except Exception:  # noqa: BLE001 - see above
            if not quietly:
                raise


def check(run: Run, target: Target, committed: set[int], head: HeadStart | None) -> Checked:
    """Report the landing files rewritten since they were ingested, refuse the run (``fail``) or copy them
    (``reingest``). ``committed``: the pending batch when the table already has it. ``head``: the run's head
    start, whose listing is the check's when it still describes the checkpoint."""
    spec, summary = run.spec, run.summary
    if not isinstance(spec.source, FileSource):
        return Checked()
    action, checkpoint = spec.source.on_overwrite, target.checkpoint
    source_root = spec.source_path(run.settings)
    # a batch planned but not written (a crash before its Delta commit) is read again by this run, as its files
    # are now: a file of it rewritten since is not an overwrite (its new content is what the replay writes)
    pending = Checkpoint(checkpoint).pending_batch()
    rereading = pending if pending is not None and pending not in committed else None
    if not indexed(spec):
        rewritten = overwrites.find_rewritten(source_root, checkpoint, rereading=rereading)
    elif action == "warn" and head is not None and (later := head.later(run)) is not None:
        def report() -> None:
            summary.overwritten_files = overwrites.report(overwrites.find_rewritten_indexed(
                run.spark, source_root, checkpoint, spec.source.options, rereading=rereading,
                listed=later.result(), listing=listing_option(spec.source)), action)

        return Checked(report=report)
    else:
        rewritten = overwrites.find_rewritten_indexed(run.spark, source_root, checkpoint, spec.source.options,
                                                      rereading=rereading, listed=head and head.listing(run),
                                                      listing=listing_option(spec.source))
    summary.overwritten_files = overwrites.report(rewritten, action)
    if rewritten and action == "fail":
        raise OverwrittenFiles(overwrites.fail_message(rewritten))
    if action != "reingest":
        return Checked()
    overwrites.delete_ingested_copies(checkpoint)  # left by a run that died between a commit and the clean-up
    if rewritten:
        summary.overwritten_files["copied"] = len(overwrites.stage_copies(source_root, checkpoint, rewritten))
    return Checked(reingest=overwrites.pending_copies(checkpoint))
