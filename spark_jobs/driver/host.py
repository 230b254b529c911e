"""A long-lived driver on a worker host: the jobs launchers hand it, one after another, in one JVM.

    spark-submit ... spark_jobs/host_driver.py --serve FOLDER --idle-seconds 300 --max-jobs 100

Started by the first launcher that needs it (:mod:`sluice.launch.host`), it takes the jobs of its folder's
inbox (:mod:`sluice.contract.host`) oldest first and runs each as a spark-submit of its own would
(:func:`spark_jobs.driver.job.run_one`, in a SparkSession of its own): the job's own lock, checkpoint, table,
ledger row and summary, and a job that fails fails alone. It stops after ``--idle-seconds`` with no job, after
``--max-jobs`` (its memory is given back), or with its JVM. A job whose launcher is gone is not started, and a
job whose launcher dies while it runs ends the driver as it would end a driver of its own
(:func:`spark_jobs.driver.job.watch_launcher`): no orphan writer beside the retry.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import threading
import time
import traceback
from collections.abc import Iterator
from pathlib import Path

from sluice.contract import JobRequest
from sluice.contract.host import (
    BEGIN,
    END,
    JOB_SETTINGS,
    HostFolder,
    read_json,
    write_json,
)
from sluice.process import launcher_alive
from sluice.spec import SpecError, load_spec
from spark_jobs.driver import jit
from spark_jobs.driver.job import Body, run_one


def serve(argv: list[str], bodies: dict[str, Body]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--serve", required=True, type=Path, help="the driver's folder (sluice.contract.host)")
    parser.add_argument("--idle-seconds", type=float, default=300.0, help="stop after this long with no job")
    parser.add_argument("--max-jobs", type=int, default=100, help="stop after this many jobs")
    args = parser.parse_args(argv)
    host = HostFolder(args.serve).make()
    parent = os.getppid()  # spark-submit's JVM: gone (killed, halted), this driver ends too
    current: dict[str, str] = {}
    _watch(parent, current, host.log)

    from spark_jobs.driver.session import get_session

    mark = time.monotonic()
    spark = get_session(app_name="sluice-host-driver")
    spark.sparkContext.setLogLevel("WARN")
    jit.release(spark, "a host driver: it lives for many runs")  # a job's plan holds C2 back for one
    session_s = round(time.monotonic() - mark, 3)
    app_id = spark.sparkContext.applicationId
    write_json(host.ready, {"pid": os.getpid(), "app_id": app_id, "started": time.time()})
    print(f"sluice host driver {app_id} (pid {os.getpid()}) serving {host.folder}", flush=True)
    jobs, idle_since = 0, time.monotonic()
    try:
        while jobs < args.max_jobs:
            entry = _take(host)
            if entry is None:
                if time.monotonic() - idle_since > args.idle_seconds:
                    print(f"sluice host driver: no job for {args.idle_seconds:g} s: stopping", flush=True)
                    break
                time.sleep(0.2)
                continue
            jobs += 1
            code, message = _run(spark, host, entry, bodies, current, session_s=session_s if jobs == 1 else 0.0,
                                 shared={"driver": "host", "app_id": app_id, "pid": os.getpid(), "position": jobs})
            write_json(host.done / entry.name, {"code": code, "message": message})
            entry.unlink(missing_ok=True)
            idle_since = time.monotonic()
        else:
            print(f"sluice host driver: {jobs} jobs run: stopping (the next job starts another)", flush=True)
    finally:
        host.ready.unlink(missing_ok=True)
        spark.stop()
    return 0


def _take(host: HostFolder) -> Path | None:
    """The oldest job of the inbox, moved to ``running`` (taken once, even by two drivers); a job whose
    launcher is gone ends at once (``done``, code 137) and the next is taken."""
    while (entry := host.oldest_entry()) is not None:
        taken = host.running / entry.name
        try:
            os.replace(entry, taken)
        except FileNotFoundError:
            continue  # taken by another
        data = read_json(taken)
        if data is not None and launcher_alive(data.get("launcher") or ""):
            return taken
        write_json(host.done / taken.name, {"code": 137, "message": "its launcher was gone: not started"})
        taken.unlink(missing_ok=True)
    return None


def _run(spark, host: HostFolder, entry: Path, bodies: dict[str, Body], current: dict[str, str], *,
         session_s: float, shared: dict) -> tuple[int, str]:
    data = read_json(entry) or {}
    print(f"{BEGIN} {entry.stem}", flush=True)
    sys.stderr.flush()
    try:
        with _settings_of(data.get("settings")):
            return _run_job(spark, data, bodies, current, session_s=session_s, shared=shared)
    finally:
        sys.stderr.flush()
        print(f"{END} {entry.stem}", flush=True)


@contextlib.contextmanager
def _settings_of(settings: dict[str, str] | None) -> Iterator[None]:
    """The job's own settings (``JOB_SETTINGS``) in this process's environment while it runs (jobs run one at a
    time), where :func:`sluice.settings.load_settings` reads them; the driver's own after it. An entry without
    any (a launcher before them) runs on the driver's, which its key then included."""
    if settings is None:
        yield
        return
    before = {k: os.environ.get(k) for k in JOB_SETTINGS}
    for key in JOB_SETTINGS:
        if key in settings:
            os.environ[key] = str(settings[key])
        else:
            os.environ.pop(key, None)
    try:
        yield
    finally:
        for key, value in before.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _run_job(spark, data: dict, bodies: dict[str, Body], current: dict[str, str], *, session_s: float,
             shared: dict) -> tuple[int, str]:
    try:
        job = JobRequest.read(Path(data["request"]))
        spec = load_spec(job.spec_path)
    except (OSError, ValueError, KeyError, SpecError) as err:
        message = f"invalid spec\n{err}" if isinstance(err, SpecError) else f"cannot read the job request: {err}"
        print(f"sluice: {message}", file=sys.stderr, flush=True)
        return 2, message
    current["launcher"] = data.get("launcher") or ""
    what = "run" if job.kind == "run" else "maintenance"
    try:
        return run_one(spark, job, spec, bodies[job.kind], what, session_s=session_s, shared=shared), ""
    except Exception as err:  # noqa: BLE001 - this job fails, the driver serves the next
        traceback.print_exc()
        return 1, f"the {what} of {spec.name} ended with {type(err).__name__}: {err}"
    finally:
        current.pop("launcher", None)


def _watch(parent: int, current: dict[str, str], log: Path) -> None:
    """End this driver when its JVM is gone, or when the launcher of the job it runs is (as a driver of its own
    ends then: :func:`spark_jobs.driver.job.watch_launcher`)."""

    def watch() -> None:
        while True:
            time.sleep(1)
            if os.getppid() != parent:
                os._exit(137)
            launcher = current.get("launcher")
            if launcher and not launcher_alive(launcher):
                # straight to the log: the JVM that would carry a print there is about to be killed
                with open(log, "a", encoding="utf-8") as out:
                    out.write(f"sluice: the launcher of this job ({launcher}) is gone: stopping the host driver\n")
                # the driver's whole process group at once (the JVM started it in a session of its own): this
                # process, which holds the job's driver lock, ends with its JVM, not a moment after it
                if os.getpgid(0) == parent:
                    os.killpg(parent, signal.SIGKILL)
                os.kill(parent, signal.SIGKILL)
                os._exit(137)

    threading.Thread(target=watch, name="sluice-host-watch", daemon=True).start()
