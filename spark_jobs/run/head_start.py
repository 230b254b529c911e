"""What a run starts before its query needs it, on a thread of its own while the query is prepared (the
source, transform and guards: mostly calls into the JVM from the driver's one Python thread, which leave the
machine's other cores idle).

For a pipeline whose files are found by sluice's discovery (``source.discovery: index``), a real run that
does not reset its checkpoint:

1. the rewritten-file check's listing (:func:`spark_jobs.sources.overwrites.list_indexed`: a ``stat`` of every
   file the index knows), which grows with the landing folder's history. The files it finds that the index has
   not seen are the query's first listing, handed over in the JVM as soon as they are known, and the query
   waits for those: on a local disk with a large index they come from a walk of the folder's names, before the
   ``stat`` of the files ingested before (below it, one walk does both). ``on_overwrite: fail`` and
   ``reingest`` need the check's answer before the query; ``warn``'s report takes it after the query
   (:mod:`spark_jobs.run.overwrite_check`);
2. when there are such files and the table exists, Delta's state of the table
   (:func:`spark_jobs.sinks.delta_table.warm_state`), which the batch's idempotent write would otherwise
   compute before writing a row: started on a thread of its own as soon as the listing meets a new file. A
   run with nothing new does not compute it.

For a Kafka source, whose backlog is asked of its brokers on a thread of its own beside the query's start
(:mod:`spark_jobs.run.backlog`): once it says records wait and the table exists, Delta's state of the table
is computed beside the query as well (:func:`warm_when_waiting`).

Both only read: a failed listing raises where the check would have run; a failed warm-up is the write's to
do again."""

from __future__ import annotations

import threading
from concurrent.futures import Future

from spark_jobs.driver.context import Run
from spark_jobs.sinks.delta_table import warm_state
from spark_jobs.sources import overwrites
from spark_jobs.sources.files import indexed, listing_option


class HeadStart:
    """The listing started for a run (:func:`start`)."""

    def __init__(self, listing: Future, found) -> None:
        self._listing = listing
        self._found = found

    def describes(self, run: Run) -> bool:
        """Whether the listing still describes the run's checkpoint: not when the run became a reset, or its
        checkpoint was set aside as replaced (the check then lists again)."""
        return not (run.job.reset or run.summary.replaced_checkpoint)

    def listing(self, run: Run) -> dict | None:
        """The listing's answer, waited for; None when it no longer describes the run's checkpoint."""
        return self._listing.result() if self.describes(run) else None

    def later(self, run: Run) -> Future | None:
        """The listing's answer to come, once its new files are known and handed over to the query's source
        (waited for here: the query's first listing is then the handed one); None as :meth:`listing`."""
        if not self.describes(run):
            return None
        try:
            self._found.get()  # completed by the JVM's listing, whatever its outcome; a failure is listing()'s
        except Exception:  # noqa: BLE001 - the listing's own error comes with its answer
            pass
        return self._listing


def start(run: Run) -> HeadStart | None:
    """The head start of a real run of an indexed file source, started; None for any other run."""
    spec, spark = run.spec, run.spark
    if run.dry_run or run.job.reset or not indexed(spec):
        return None
    source_root, checkpoint = spec.source_path(run.settings), run.real.checkpoint
    table_exists = run.summary.delta_version_before is not None
    listing: Future = Future()
    # completed by the listing: with true at the first new file it meets (the table's state starts then), and
    # with the count of new files once they are handed over to the query's source (the query waits for that)
    futures = spark._jvm.java.util.concurrent.CompletableFuture
    any_unseen, found = futures(), futures()

    def work() -> None:
        try:
            listed = overwrites.list_indexed(spark, source_root, checkpoint, spec.source.options, hand_over=True,
                                             any_unseen=any_unseen, found=found,
                                             listing=listing_option(spec.source))
        except BaseException as err:  # noqa: BLE001 - raised by listing() in the run's own thread
            any_unseen.complete(False)  # the JVM's listing may never have started
            found.complete(-1)
            listing.set_exception(err)
            return
        listing.set_result(listed)

    def warm() -> None:
        try:
            waiting = any_unseen.get()
        except Exception:  # noqa: BLE001 - an optimisation only: the write computes the state itself
            return
        if waiting:
            _warm(spark, run.real.table)

    threading.Thread(target=work, name="sluice-head-start", daemon=True).start()
    if table_exists:
        threading.Thread(target=warm, name="sluice-warm-table", daemon=True).start()
    return HeadStart(listing, found)


def warm_when_waiting(run: Run, measured: dict | Future | None) -> None:
    """Delta's state of the table computed on a thread of its own once a Kafka source's backlog, being
    measured (a Future: :func:`spark_jobs.run.backlog.before_query`), says records wait; nothing for a dry run,
    a reset, a table not made yet, or any other source."""
    if not isinstance(measured, Future) or run.dry_run or run.job.reset or run.summary.delta_version_before is None:
        return
    spark, table = run.spark, run.real.table

    def when_measured(done: Future) -> None:
        # on a thread of its own: a Future already done calls this in the run's own thread
        if not done.cancelled() and done.exception() is None and (done.result().get("offsets") or 0) > 0:
            threading.Thread(target=_warm, args=(spark, table), name="sluice-warm-table", daemon=True).start()

    measured.add_done_callback(when_measured)


def _warm(spark, table: str) -> None:
    """:func:`warm_state`, its failure ignored: an optimisation only, the write computes the state itself."""
    try:
        warm_state(spark, table)
    except Exception:  # noqa: BLE001 - see above
        pass
