"""One run of a pipeline at a time: a lock per pipeline, held by the processes of the run.

The lock is an advisory ``flock`` on a file under ``<checkpoint root>/_locks/``: the kernel releases it
when the process holding it ends, however it ends (kill -9 included), so a killed run never blocks the
next one. Two locks per pipeline:

* ``<name>.lock``: taken by the launcher (``sluice run``, the Airflow task) before spark-submit starts, so
  a second run is refused at once, without waiting for a JVM;
* ``<name>.driver.lock``: taken by the Spark driver itself, so that a driver left running after its
  launcher died (an orphan) still keeps the next run's driver from writing beside it.

The file holds who took it (pid, host, run id, Airflow ids), which the refusal message quotes.
Works on one host, or hosts sharing a file system with working ``flock`` (local disk, NFSv4). When the
checkpoint root is an object store, the same two locks are lease objects in the store (:class:`LeaseLock`).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from email.utils import parsedate_to_datetime
from pathlib import Path
from typing import Any

from sluice.storage.object_store import ObjectStore, bucket_and_key, is_object_store_uri


class PipelineBusy(RuntimeError):
    """Another run of the pipeline holds its lock; the message names that run."""

    def __init__(self, pipeline: str, holder: dict[str, Any], lock_file: Path | str, waited: float = 0,
                 frees: str = "when that process ends"):
        self.pipeline = pipeline
        self.holder = holder
        self.lock_file = lock_file
        waited_text = f" after waiting {waited:.0f} s" if waited else ""
        super().__init__(
            f"pipeline {pipeline} is already running ({describe_holder(holder)}); this run was refused{waited_text} "
            "and changed nothing. Wait for that run to finish (one run of a pipeline at a time keeps its checkpoint "
            f"consistent); the lock frees itself {frees}. Lock file: {lock_file}"
        )


def describe_holder(holder: dict[str, Any]) -> str:
    if not holder:
        return "holder unknown"
    parts = [f"pid {holder.get('pid')} on {holder.get('host')}"]
    if holder.get("mode") == "maintenance":
        parts.append("maintenance (OPTIMIZE/VACUUM)")
    if holder.get("run_id"):
        parts.append(f"run {holder['run_id']}")
    if holder.get("dag_id"):
        parts.append(f"Airflow dag {holder['dag_id']} run {holder.get('dag_run_id')} try {holder.get('try_number')}")
    if holder.get("since"):
        parts.append(f"since {holder['since']}")
    return ", ".join(parts)


def lock_dir(checkpoint_root: Path) -> Path:
    return checkpoint_root / "_locks"


@dataclass
class PipelineLock:
    """``with PipelineLock(path, "orders", holder={...}):`` -- raises :class:`PipelineBusy` if held."""

    path: Path
    pipeline: str
    holder: dict[str, Any] = field(default_factory=dict)
    _fd: int | None = None

    wait_seconds: float = 0
    """How long :meth:`acquire` waits for the holder to finish before refusing (0: refuse at once).
    Maintenance waits; a run is refused at once."""

    def acquire(self) -> PipelineLock:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        deadline = time.monotonic() + self.wait_seconds
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() < deadline:
                    time.sleep(min(2.0, max(0.05, deadline - time.monotonic())))
                    continue
                holder = _read(fd)
                os.close(fd)
                raise PipelineBusy(self.pipeline, holder, self.path, self.wait_seconds) from None
        info = {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "since": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            **{k: v for k, v in self.holder.items() if v is not None},
        }
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(info).encode(), 0)
        self._fd = fd
        return self

    def release(self) -> None:
        if self._fd is not None:
            os.ftruncate(self._fd, 0)
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> PipelineLock:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


def _read(fd: int) -> dict[str, Any]:
    try:
        text = os.pread(fd, 65536, 0).decode()
        return json.loads(text) if text.strip() else {}
    except (OSError, ValueError):
        return {}


def pipeline_lock(checkpoint_root: Path | str, name: str, pipeline: str, holder: dict[str, Any], *,
                  wait_seconds: float = 0, lease_seconds: float | None = None):
    """The lock file ``name`` of ``<checkpoint root>/_locks/``: a ``flock`` on local disk, a lease object in the
    store when the checkpoint root is an object store URI (:class:`LeaseLock`)."""
    if is_object_store_uri(str(checkpoint_root)):
        return LeaseLock(f"{str(checkpoint_root).rstrip('/')}/_locks/{name}", pipeline, holder,
                         wait_seconds=wait_seconds, lease_seconds=lease_seconds or DEFAULT_LEASE_SECONDS)
    return PipelineLock(lock_dir(Path(checkpoint_root)) / name, pipeline, holder, wait_seconds=wait_seconds)


def launcher_lock(checkpoint_root: Path | str, pipeline: str, holder: dict[str, Any], *,
                  lease_seconds: float | None = None):
    return pipeline_lock(checkpoint_root, f"{pipeline}.lock", pipeline, holder, lease_seconds=lease_seconds)


BACKFILL_LOCK_WAIT_SECONDS = 3600
"""A backfill run waits this long for the pipeline's running run (incremental, another backfill day) to
finish: an Airflow backfill starts several days' runs at once, and they are serialized, not refused."""


def run_lock(checkpoint_root: Path | str, pipeline: str, holder: dict[str, Any], *, dry_run: bool,
             backfill: bool = False, lease_seconds: float | None = None):
    """What a launcher holds around spark-submit: the pipeline's launcher lock for a real run (refused at once
    if held; a backfill run waits for it); nothing for a dry run, which changes neither checkpoint nor table."""
    if dry_run:
        return contextlib.nullcontext()
    lock = launcher_lock(checkpoint_root, pipeline, holder, lease_seconds=lease_seconds)
    if backfill:
        lock.wait_seconds = BACKFILL_LOCK_WAIT_SECONDS
    return lock


def maintenance_lock(checkpoint_root: Path | str, pipeline: str, holder: dict[str, Any], wait_seconds: float, *,
                     lease_seconds: float | None = None):
    """What a maintenance launcher holds: the pipeline's launcher lock, waited for (a run finishes first)."""
    return pipeline_lock(checkpoint_root, f"{pipeline}.lock", pipeline, holder, wait_seconds=wait_seconds,
                         lease_seconds=lease_seconds)


def driver_lock(checkpoint_root: Path | str, pipeline: str, holder: dict[str, Any], *,
                lease_seconds: float | None = None):
    return pipeline_lock(checkpoint_root, f"{pipeline}.driver.lock", pipeline, holder, lease_seconds=lease_seconds)


# --- on object storage: a lease object in the store -------------------------------------------------

DEFAULT_LEASE_SECONDS = 60.0

_held: list[LeaseLock] = []
_held_guard = threading.Lock()


class LeaseLost(RuntimeError):
    """This process no longer holds a lease it took: another run may be writing; nothing more is committed."""


def check_held() -> None:
    """Raise :class:`LeaseLost` unless every lease this process holds is still its own (called right before a
    Delta commit; nothing to check when the process holds none, as with a local ``flock``)."""
    with _held_guard:
        held = list(_held)
    for lock in held:
        lock.check()


class LeaseLock:
    """The pipeline lock on object storage, for hosts that share no file system:
    ``with LeaseLock("s3a://b/cp/_locks/orders.lock", "orders", holder={...}):`` raises :class:`PipelineBusy`
    if another holder's lease is live (after ``wait_seconds``).

    When the checkpoint root is a bucket (``s3a://...``), the lock cannot be a ``flock``:
    the launcher and the driver of two runs may be on different hosts. It is an object instead,
    ``<checkpoint root>/_locks/<pipeline>.lock`` (and ``.driver.lock``), holding the holder (host, pid, run id,
    Airflow ids) as JSON:

    * **taken** by a conditional write, ``If-None-Match: *``: of two takers, the store lets exactly one create it;
    * **renewed** by its holder every ``lease/4`` seconds, by a write with ``If-Match: <the etag it wrote>``
      (compare-and-swap): a holder whose object was replaced learns that it lost the lease;
    * **expired** when the object has not been rewritten for ``lease`` seconds, by the store's own clock (the
      ``Date`` of its answer minus the object's ``Last-Modified``: no two hosts' clocks are compared). A holder that
      died (kill -9, a lost host) is then taken over, again by ``If-Match`` on the expired object's etag, so only
      one taker wins;
    * **released** by deleting it at the end of the run.

    A holder that was paused (SIGSTOP, a long GC, a partitioned host) past its lease may have been taken over
    while it did not look: before each Delta commit the driver calls :func:`check_held`, which refuses the commit
    (:class:`LeaseLost`) unless the lease was renewed within three quarters of ``lease`` AND the object in the
    store is still the one it wrote (by its token: a renewal the store applied whose answer was lost on a busy
    store changed the etag, not the holder, and is taken as its own). The holder counts its lease from the
    moment it sent the write (the store may date the object from then, and a first write to a bucket can take
    seconds). ``lease`` is
    ``SLUICE_LOCK_LEASE_SECONDS`` (60 by default): a dead holder blocks the next run at most that long.

    The check is made right before a Delta write starts (``spark_jobs.sinks.table``, and the table creations, ALTERs,
    deletes and maintenance commits): Delta's commit is the end of that write. The last quarter of the lease
    is the margin for it; a holder paused inside its own write for longer than that is the window left, so
    keep the lease well above a batch's write time. Delta on S3A (``S3SingleDriverLogStore``) is safe with one writer per
    table at a time: the lease is what gives the sink and quarantine tables that one writer.
    """

    def __init__(self, uri: str, pipeline: str, holder: dict[str, Any] | None = None, *, wait_seconds: float = 0,
                 lease_seconds: float = DEFAULT_LEASE_SECONDS, store: ObjectStore | None = None) -> None:
        self.path = uri  # what PipelineBusy quotes as the lock file
        self.pipeline, self.holder = pipeline, holder or {}
        self.wait_seconds, self.lease_seconds = wait_seconds, lease_seconds
        self.store = store or ObjectStore.from_env()
        self.bucket, self.key = bucket_and_key(uri)
        self._client = None
        self._etag: str | None = None
        self._renewed = 0.0
        self._lost: str | None = None
        self._stop = threading.Event()
        self._renewer: threading.Thread | None = None
        self._info: dict[str, Any] = {}
        self._writes = 0

    @property
    def client(self):
        if self._client is None:
            self._client = self.store.boto3_client()
        return self._client

    def acquire(self) -> LeaseLock:
        # a token and a count of writes make every write's etag new, the renewals' too
        self._info = {"pid": os.getpid(), "host": socket.gethostname(),
                      "since": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                      "lease_seconds": self.lease_seconds, "token": uuid.uuid4().hex,
                      **{k: v for k, v in self.holder.items() if v is not None}}
        deadline = time.monotonic() + self.wait_seconds
        while True:
            # the lease runs from the moment the write was sent: the store may date the object from then
            sent = time.monotonic()
            if self._put(if_none_match=True):
                break
            current = self._current()
            if current is None:  # released between our write and our look: try again
                time.sleep(0.05)
                continue
            etag, age, holder = current
            sent = time.monotonic()
            if age > self.lease_seconds and self._put(if_match=etag):
                break  # the holder stopped renewing (it died): its lease is ours now
            if time.monotonic() < deadline:
                time.sleep(min(2.0, max(0.05, deadline - time.monotonic())))
                continue
            raise PipelineBusy(self.pipeline, holder, self.path, self.wait_seconds,
                               frees=f"when that run ends, or {self.lease_seconds:.0f} s after it died (its lease)")
        self._renewed, self._lost = sent, None
        self._stop.clear()
        self._renewer = threading.Thread(target=self._renew_loop, name=f"sluice-lease-{self.pipeline}", daemon=True)
        self._renewer.start()
        with _held_guard:
            _held.append(self)
        return self

    def check(self) -> None:
        """Raise :class:`LeaseLost` unless the lease was renewed within three quarters of its length (a quarter
        is left for the commit that follows the check) and the store still holds the object this process
        wrote."""
        if self._etag is None:
            raise LeaseLost(f"the lock {self.path} of pipeline {self.pipeline} is not held by this process")
        late = time.monotonic() - self._renewed
        if self._lost is None and late >= self.lease_seconds * 0.75:
            self._lost = (f"its lease ({self.lease_seconds:.0f} s) was last renewed {late:.0f} s ago: too late "
                          "to commit safely, another run may take it over")
        if self._lost is None:
            current = self._current()
            if current is not None and self._ours(current):
                # its etag may be a renewal's whose answer this process did not see (yet): still this lease
                self._etag = current[0]
            else:
                holder = describe_holder(current[2]) if current else "nobody (the lock object is gone)"
                self._lost = f"the lock is now held by {holder}"
        if self._lost:
            raise LeaseLost(f"this run of pipeline {self.pipeline} lost its lock {self.path}: {self._lost}. "
                            "Nothing more is committed; the run that holds the lock now carries on from the "
                            "checkpoint, exactly once.")

    def release(self) -> None:
        self._stop.set()
        if self._renewer is not None:
            self._renewer.join(timeout=self.lease_seconds)
            self._renewer = None
        with _held_guard:
            if self in _held:
                _held.remove(self)
        if self._etag is not None and self._lost is None:
            try:
                current = self._current()
                if current is not None and self._ours(current):
                    self.client.delete_object(Bucket=self.bucket, Key=self.key)
            except Exception as err:  # noqa: BLE001 - the run's own outcome stands; the lease ends by itself
                # the store did not answer (it stopped mid-run): the lock is left, and frees itself when its
                # lease ends, as a dead holder's does. Raising here would hide why the run failed.
                print(f"sluice: could not release the lock {self.path} ({type(err).__name__}: {err}): it frees "
                      f"itself {self.lease_seconds:.0f} s after this run (its lease)", file=sys.stderr, flush=True)
        self._etag = None

    def __enter__(self) -> LeaseLock:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()

    # --- the store --------------------------------------------------------------------------------

    def _put(self, *, if_none_match: bool = False, if_match: str | None = None) -> bool:
        """A conditional write of the holder; False when the condition failed (another holder's object)."""
        from botocore.exceptions import ClientError

        condition = {"IfNoneMatch": "*"} if if_none_match else {"IfMatch": if_match}
        self._writes += 1
        body = json.dumps({**self._info, "writes": self._writes}).encode()
        try:
            answer = self.client.put_object(Bucket=self.bucket, Key=self.key, Body=body,
                                            ContentType="application/json", **condition)
        except ClientError as err:
            if _status(err) in (409, 412) or _code(err) in ("PreconditionFailed", "ConditionalRequestConflict"):
                return False
            raise
        self._etag = answer["ETag"]
        return True

    def _current(self) -> tuple[str, float, dict[str, Any]] | None:
        """The lock object as the store has it: (etag, seconds since it was written by the store's clock,
        holder); None when there is none."""
        from botocore.exceptions import ClientError

        try:
            answer = self.client.get_object(Bucket=self.bucket, Key=self.key)
        except ClientError as err:
            if _status(err) == 404 or _code(err) in ("NoSuchKey", "404", "NotFound"):
                return None
            raise
        body = answer["Body"].read()
        now = parsedate_to_datetime(answer["ResponseMetadata"]["HTTPHeaders"]["date"])
        age = (now - answer["LastModified"]).total_seconds()
        try:
            holder = json.loads(body) if body.strip() else {}
        except ValueError:
            holder = {}
        return answer["ETag"], age, holder if isinstance(holder, dict) else {}

    def _ours(self, current: tuple[str, float, dict[str, Any]]) -> bool:
        """Whether the lock object the store holds was written by this lease (its token), whatever its etag:
        a write whose answer was lost changed the etag but not the holder."""
        return bool(self._info.get("token")) and current[2].get("token") == self._info["token"]

    def _renew_loop(self) -> None:
        while not self._stop.wait(self.lease_seconds / 4):
            try:
                sent = time.monotonic()
                if self._put(if_match=self._etag):
                    self._renewed = sent
                    continue
                current = self._current()
                if current is not None and self._ours(current):
                    # an earlier renewal was applied but its answer lost (a timeout, a retry): the object is
                    # still this lease's; take its etag and renew from it
                    self._etag = current[0]
                    if self._put(if_match=self._etag):
                        self._renewed = sent
                    continue
                self._lost = "another run replaced the lock object after this run's lease expired"
                return
            except Exception:  # the store did not answer: try again; check() fails once the lease is over
                continue


def _status(err) -> int | None:
    return (err.response.get("ResponseMetadata") or {}).get("HTTPStatusCode")


def _code(err) -> str:
    return str((err.response.get("Error") or {}).get("Code") or "")
