"""Hand a job to this host's long-lived driver instead of a spark-submit of its own (``SLUICE_SHARED_DRIVER=host``).

    submit = host_submit(settings, master)      # in place of subprocess_submit(master) or the hook's submit
    summary = launch(plan, lock, submit)        # the same launcher: lock, summary, JobFailed

The driver (:mod:`spark_jobs.driver.host`) serves one folder (:mod:`sluice.contract.host`) named by
:func:`driver_key`: jobs whose Spark settings, jars, master or environment differ get drivers of their own,
as a group refuses them (:func:`sluice.launch.submit.group_plan`). The first job that finds no driver starts
one (a spark-submit of ``spark_jobs/host_driver.py``, in a session of its own: it outlives this process); the
job's lock is still the launcher's, held around the hand-over as around a spark-submit. The job's output (its
part of the driver's log) is copied to this process's stderr, where a spark-submit's would be.

A driver killed while it runs a job fails that job here ("ended during the ..."): its retry resumes from the
checkpoint, as after a spark-submit killed. A job the driver had not taken is handed to the next driver.

Imports neither Airflow nor PySpark.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from sluice.contract.host import (
    BEGIN,
    END,
    JOB_SETTINGS,
    HostFolder,
    read_json,
    write_json,
)
from sluice.launch.submit import SubmitPlan, spark_jobs_dir, spark_submit_command
from sluice.process import LAUNCHER_ENV, launcher_alive, launcher_token
from sluice.settings import Settings

MAX_JOBS = 100
"""A host driver stops after this many jobs (the next job starts another): what a long-lived JVM keeps of each
job's session is given back."""
ENVIRONMENT_PREFIXES = ("SLUICE_", "SPARK_", "PYSPARK_", "JAVA_", "HADOOP_", "AWS_")
"""The launcher's environment variables a driver reads (settings, S3 credentials, the JVM): part of its key."""
START_SECONDS = 600.0
"""How long a driver may take to start and take its first job (a busy machine) before the job fails."""


class HostDriverFailed(RuntimeError):
    """The host driver ended before the job's end, or refused the job: the message says which, with its log."""


def driver_key(plan: SubmitPlan, master: str, environ: dict[str, str] | None = None) -> str:
    """What a driver cannot change once started, digested: jobs with the same key share a driver."""
    env = os.environ if environ is None else environ
    settled = {
        "master": master, "conf": plan.conf, "jars": plan.jars,
        "env": {k: v for k, v in plan.env_vars.items() if k != LAUNCHER_ENV and k not in JOB_SETTINGS},
        "environment": {k: v for k, v in sorted(env.items())
                        if k.startswith(ENVIRONMENT_PREFIXES) and k not in JOB_SETTINGS},
    }
    return hashlib.sha256(json.dumps(settled, sort_keys=True).encode()).hexdigest()[:20]


def job_settings(plan: SubmitPlan, environ: dict[str, str] | None = None) -> dict[str, str]:
    """The job's own settings (:data:`sluice.contract.host.JOB_SETTINGS`) as its spark-submit would have them:
    the plan's environment over the launcher's."""
    env = {**(os.environ if environ is None else environ), **plan.env_vars}
    return {k: env[k] for k in JOB_SETTINGS if k in env}


def host_submit(settings: Settings, master: str, *, spark_binary: str = "spark-submit",
                poll_seconds: float = 0.2) -> Callable[[SubmitPlan], None]:
    """A ``submit`` for :func:`sluice.launch.launcher.launch` that hands the plan's job to the host driver."""

    def submit(plan: SubmitPlan) -> None:
        hand(plan, settings, master, spark_binary=spark_binary, poll_seconds=poll_seconds)

    return submit


def hand(plan: SubmitPlan, settings: Settings, master: str, *, spark_binary: str = "spark-submit",
         poll_seconds: float = 0.2) -> None:
    """Hand the job to the driver and wait for its end; raise :class:`HostDriverFailed` if it did not end well."""
    host = HostFolder(private_root(Path(settings.shared_driver_dir)) / driver_key(plan, master)).make()
    entry_id = f"{time.time_ns()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"
    request = plan.application_args[plan.application_args.index("--request") + 1]
    log_from = host.log.stat().st_size if host.log.exists() else 0
    entry = host.inbox / f"{entry_id}.json"
    write_json(entry, {"request": request, "launcher": launcher_token(), "pipeline": plan.pipeline, "kind": plan.what,
                       "settings": job_settings(plan)})
    started = _ensure_driver(host, plan, settings, master, spark_binary)
    deadline = time.monotonic() + START_SECONDS
    done = host.done / f"{entry_id}.json"
    try:
        while True:
            outcome = read_json(done)
            if outcome is not None:
                done.unlink(missing_ok=True)
                _copy_output(host, entry_id, log_from)
                if outcome.get("code") != 0:
                    raise HostDriverFailed(f"the host driver's {plan.what} of {plan.pipeline} ended with code "
                                           f"{outcome.get('code')}{': ' + outcome['message'] if outcome.get('message') else ''}")
                return
            if _alive(host):
                if started is not None and host.ready.exists():
                    started = None  # the driver it started is up: its end from now on is no failed start
                if entry.exists() and time.monotonic() > deadline:
                    raise HostDriverFailed(f"the host driver did not take the {plan.what} of {plan.pipeline} within "
                                           f"{START_SECONDS:g} s; its log: {host.log}\n{_tail(host.log)}")
                time.sleep(poll_seconds)
                continue
            if read_json(done) is not None:
                continue  # it ended the job, then stopped
            if entry.exists():  # not taken: the next driver takes it
                if started is not None:
                    raise HostDriverFailed(f"the host driver this {plan.what} started ended before it took any "
                                           f"job; its log: {host.log}\n{_tail(host.log)}")
                started = _ensure_driver(host, plan, settings, master, spark_binary)
                continue
            _copy_output(host, entry_id, log_from, wait_seconds=0)
            raise HostDriverFailed(f"the host driver ended during the {plan.what} of {plan.pipeline} (killed, or its "
                                   f"JVM halted): the next run resumes from the checkpoint; its log: {host.log}")
    finally:
        entry.unlink(missing_ok=True)  # a job given up is never started


def private_root(root: Path) -> Path:
    """The drivers' folder, made this user's alone (0700) when missing; one that another user owns or can
    write to is refused: whoever can drop a job in a driver's inbox runs it as this user."""
    root.mkdir(mode=0o700, parents=True, exist_ok=True)
    found = root.stat()
    if found.st_uid != os.getuid() or found.st_mode & 0o022:
        raise HostDriverFailed(f"the shared drivers' folder {root} is not this user's alone (owner uid "
                               f"{found.st_uid}, mode {found.st_mode & 0o777:o}): point SLUICE_SHARED_DRIVER_DIR at "
                               "a folder only this user can write to, or remove it to have it made so")
    return root


def _alive(host: HostFolder) -> bool:
    spawn = read_json(host.spawn)
    return bool(spawn) and launcher_alive(spawn.get("token") or "")


def _ensure_driver(host: HostFolder, plan: SubmitPlan, settings: Settings, master: str,
                   spark_binary: str) -> str | None:
    """Start the folder's driver unless one serves it (one launcher at a time decides); the new driver's token,
    or None when one was there."""
    with open(host.folder / "start.lock", "a") as lock_file:
        fcntl.flock(lock_file, fcntl.LOCK_EX)
        try:
            if _alive(host):
                return None
            serving = SubmitPlan(
                application=str(spark_jobs_dir() / "host_driver.py"),
                application_args=["--serve", str(host.folder), "--idle-seconds", f"{settings.shared_driver_idle_seconds:g}",
                                  "--max-jobs", str(MAX_JOBS)],
                conf=plan.conf, jars=plan.jars, name="sluice-host-driver", conn_id=plan.conn_id,
                env_vars={k: v for k, v in plan.env_vars.items() if k != LAUNCHER_ENV})
            command = spark_submit_command(serving, master)
            command[0] = spark_binary
            env = {k: v for k, v in {**os.environ, **serving.env_vars}.items() if k != LAUNCHER_ENV}
            with open(host.log, "ab") as log:
                log.write(f"--- {time.strftime('%Y-%m-%d %H:%M:%S')} started by pid {os.getpid()}: "
                          f"{' '.join(command)}\n".encode())
                log.flush()
                process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                           env=env, start_new_session=True)
            threading.Thread(target=process.wait, daemon=True).start()  # reaped when it ends, if we still live
            token = launcher_token(process.pid)
            write_json(host.spawn, {"pid": process.pid, "token": token})
            print(f"sluice: started the host driver (pid {process.pid}, log {host.log})", file=sys.stderr, flush=True)
            return token
        finally:
            fcntl.flock(lock_file, fcntl.LOCK_UN)


def _copy_output(host: HostFolder, entry_id: str, log_from: int, wait_seconds: float = 30.0) -> None:
    """The job's part of the driver's log (between its begin and end lines) to stderr, as a spark-submit's
    output would be; waits a moment for the end line (the driver's output reaches the log through its JVM)."""
    begin, end = f"{BEGIN} {entry_id}", f"{END} {entry_id}"
    deadline = time.monotonic() + wait_seconds
    while True:
        with contextlib.suppress(OSError), open(host.log, "rb") as log:
            log.seek(log_from)
            text = log.read().decode("utf-8", errors="replace")
            if begin in text and (end in text or time.monotonic() >= deadline):
                part = text[text.index(begin) + len(begin):]
                part = part[:part.index(end)] if end in part else part
                sys.stderr.write(part.lstrip("\n"))
                sys.stderr.flush()
                return
        if time.monotonic() >= deadline:
            return
        time.sleep(0.1)


def _tail(path: Path, size: int = 4000) -> str:
    try:
        with open(path, "rb") as log:
            log.seek(max(0, log.seek(0, os.SEEK_END) - size))
            return log.read().decode("utf-8", errors="replace")
    except OSError:
        return "(no log)"


def stop_drivers(folder: Path) -> list[int]:
    """Stop every host driver under ``folder`` (their process trees): what ``sluice`` tests and operators use to
    end them before their idle time. The pids stopped."""
    from sluice.process import kill_tree

    stopped = []
    for spawn in sorted(Path(folder).glob("*/spawn.json")):
        data = read_json(spawn) or {}
        if data.get("token") and launcher_alive(data["token"]):
            stopped += kill_tree(int(data["pid"]))
    return stopped
