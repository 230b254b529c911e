"""The pipeline lock between runs of one pipeline: a backfill run waits for the running run (an Airflow backfill
starts several days' runs at once), an incremental run is refused at once, a dry run takes no lock."""

from __future__ import annotations

import threading

import pytest

from sluice.storage.lock import BACKFILL_LOCK_WAIT_SECONDS, PipelineBusy, run_lock


def test_a_backfill_run_waits_for_the_running_incremental_run_then_holds_the_lock(tmp_path):
    incremental = run_lock(tmp_path, "orders", {"run_id": "scheduled__1"}, dry_run=False).acquire()
    backfill = run_lock(tmp_path, "orders", {"run_id": "backfill__2026-11-02"}, dry_run=False, backfill=True)
    assert backfill.wait_seconds == BACKFILL_LOCK_WAIT_SECONDS == 3600
    released = threading.Event()

    def release_the_incremental_run():
        released.set()  # before the release: the backfill cannot get the lock before this is set
        incremental.release()

    threading.Timer(0.5, release_the_incremental_run).start()

    with backfill:
        # it waited for the incremental run (an order of events, not a duration: no bound a busy machine breaks)
        assert released.is_set()
        # while the backfill holds it, the next incremental run is refused at once -- it does not wait (a refusal
        # after a wait says "refused after waiting N s") --, naming the backfill
        incremental_run = run_lock(tmp_path, "orders", {"run_id": "scheduled__2"}, dry_run=False)
        assert incremental_run.wait_seconds == 0
        with pytest.raises(PipelineBusy, match=r"pipeline orders is already running \(pid \d+ on .*, run "
                                               r"backfill__2026-11-02, since .*\); this run was refused and "
                                               r"changed nothing"):
            incremental_run.acquire()
    # released: the next incremental run gets it
    run_lock(tmp_path, "orders", {"run_id": "scheduled__2"}, dry_run=False).acquire().release()


def test_a_dry_run_takes_no_lock_so_it_runs_beside_a_real_run(tmp_path):
    with run_lock(tmp_path, "orders", {"run_id": "scheduled__1"}, dry_run=False):
        with run_lock(tmp_path, "orders", {"run_id": "manual__dry"}, dry_run=True) as dry:
            assert dry is None
