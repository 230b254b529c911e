"""`make chaos`: kill sluice runs at exact and random moments and prove that no record is lost or duplicated.

For each pipeline (files -> Delta append, Kafka -> Delta append, files -> Delta MERGE with CDC updates and
deletes), every round:

1. produces new input (unique ids; for MERGE: new keys, updates with a higher version, deletions), with bad
   records among it: malformed JSON, a value of the wrong type, and rows that violate an expectation with
   ``on_violation: quarantine`` -- so a quarantine write is in flight when a run dies;
2. starts `sluice run` and kills it with one of the kill modes below, and records what actually happened:
   ``halted`` (the fault-injecting file system halted the JVM at the exact point: its line on stderr, and
   spark-submit's exit 137), ``killed_in_flight`` (kill -9 sent while the run was still running and before
   it printed its summary) or ``missed`` (the run finished first: the round is drawn again, not counted);
3. runs `sluice run` again, to completion;
4. compares BOTH tables with everything produced so far, by id: each good record in the sink exactly once
   (MERGE: each live key at its latest version, no deleted key back), each bad record in the quarantine
   table exactly once, and no record in both (lost, duplicated, stale per table).

Kill modes (``--modes``; a round picks one of those that apply to the pipeline at random):

  random                    kill -9 of the whole process tree (launcher, spark-submit JVM, Python driver)
                            after a random delay, anywhere from start-up to the end of the run
  before_offsets            the JVM halts before the checkpoint's offsets/N is written (batch planned)
  before_index_list         file sources (files, merge; source.discovery: index): the JVM halts before the
                            discovery index writes a batch's file list (sources/0/N), the files just listed
                            (after it and before offsets/N is before_offsets)
  before_listing_marks      the files pipeline (source.listing: incremental, look_back 0s): the JVM halts after
                            the batch lists of what a listing found and before the listing's marks
                            (sources/0/index/marks) replace the older ones, which the next run lists from
  before_commit             the JVM halts before the sink's Delta commit (data files written, not committed)
  between_commits           the JVM halts after the Delta commit, before the checkpoint's commits/N
  before_quarantine_commit  the JVM halts before the quarantine table's Delta commit: on the one-pass path
                            (files) that is after the sink's commit, between a batch's two commits
  before_marker_write       one-pass path only: before the marker that names a batch between its two commits
                            (``sluice_quarantine_pending``) is written
  before_marker_clear       one-pass path only: after both commits, right before the marker is cleared

With ``--storage s3`` (``make chaos CHAOS_STORAGE=s3``) the tables, the checkpoints and the ledger live in a
bucket of the project's S3 server (SeaweedFS, started for the run) and the exact moments come from a
fault-injecting S3A (jvm/chaos's HaltingS3AFileSystem, matched on the object's key). One more fault there:

  store_down                the object store is stopped (killed) while the run waits right before its sink's Delta
                            commit (a pause in the same file system); the run must fail within
                            STORE_DOWN_BOUND_SECONDS with "object store unreachable at ...", and, the store
                            started again, the next run must resume exactly once. These rounds run after the
                            others, one pipeline at a time (a stopped store stops every run).

The files pipeline is written on the one-pass path; the Kafka pipeline carries an expectation set to
``fail`` that never trips, which keeps it on the counted path (quarantine first, then the sink), as MERGE is.
The exact moments come from a fault-injecting local file system (jvm/chaos, built at set-up into
var/jars/chaos/sluice-chaos.jar) that halts the JVM -- like kill -9, no shutdown hooks -- just before a file
is renamed into place (Spark's checkpoint logs, Delta's log and sluice's marker are all written that way) or
deleted.

    python -m bench.chaos [--rounds 50] [--pipelines files,kafka,merge] [--modes ...] [--seed N] [--storage s3]

Prints a table (and writes bench/results/chaos.{md,json}, or chaos-s3.{md,json}); exits 1 on any lost, duplicated or stale record
in either table, on a run that did not complete after a kill, or on a halt mode that never fired.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from bench import BIN, HOME, RESULTS
from sluice.settings import load_settings
from sluice.storage.object_store import (
    ObjectStore,
    bucket_and_key,
    delta_rs_location,
)

MODES = ("random", "before_offsets", "before_index_list", "before_listing_marks", "before_commit", "between_commits",
         "before_quarantine_commit", "before_marker_write", "before_marker_clear")
ONE_PASS_MODES = ("before_marker_write", "before_marker_clear", "before_listing_marks")
"""Modes that only exist for the files pipeline: the one-pass path (the counted path writes no marker), and its
incremental listing (MERGE's lists every name)."""
FILE_SOURCE_MODES = ("before_index_list",)
"""Modes that only exist with a file source (the files and MERGE pipelines): Kafka keeps no discovery index."""
OUTCOMES = ("halted", "killed_in_flight", "missed")
HALT_LINE = "sluice chaos: halting the JVM before"
PIPELINES = ("files", "kafka", "merge")
HALT_ENV = "SLUICE_CHAOS_HALT_BEFORE"
HALT_DELETE_ENV = "SLUICE_CHAOS_HALT_BEFORE_DELETE"
PAUSE_ENV = "SLUICE_CHAOS_PAUSE_BEFORE"
PAUSE_FILE_ENV = "SLUICE_CHAOS_PAUSE_FILE"
STORAGES = ("local", "s3")
STORE_DOWN_BOUND_SECONDS = 180
"""A run whose object store stops mid-run fails within this long: S3A's bounded retries (3 attempts, 3 retries,
see ``sluice.spark_conf.s3a_conf``), then the driver's and the launcher's last words to the store (the ledger,
the lease), each bounded too."""
STORE_DOWN_LINE = "object store unreachable at"
LEASE_SECONDS = 10
"""The lease of the pipeline lock in the bucket during a chaos run: a killed run's lock frees itself after this
long (60 s by default); the next run waits for it, as an Airflow retry would."""
ROWS_PER_ROUND = 300
BAD_PER_ROUND = 30
"""Bad records per round, a third of each kind: malformed JSON, a wrong type, an expectation violated."""
BAD_ID_BASE = 1_000_000_000
"""The MERGE pipeline's bad records carry ids of their own range: they must never touch a real key."""


def log(message: str) -> None:
    print(f"[chaos] {message}", file=sys.stderr, flush=True)


def chaos_jar() -> Path:
    jar = load_settings().jars_dir / "chaos" / "sluice-chaos.jar"
    if not jar.is_file():
        raise FileNotFoundError(f"{jar} is missing: run `make install` (it builds jvm/chaos)")
    return jar


def chaos_spark_conf(storage: str = "local") -> dict[str, str]:
    """The spec's spark_conf that plugs the fault-injecting file system into a run (its jar is on the
    driver's class path through SPARK_DIST_CLASSPATH, see :class:`Lake`)."""
    if storage == "s3":
        return {"spark.hadoop.fs.s3a.impl": "dev.sluice.chaos.HaltingS3AFileSystem",
                "spark.hadoop.fs.AbstractFileSystem.s3a.impl": "dev.sluice.chaos.HaltingS3A"}
    return {"spark.hadoop.fs.AbstractFileSystem.file.impl": "dev.sluice.chaos.HaltingLocalFs"}


@dataclass
class Lake:
    """Where a chaos run keeps its tables, checkpoints and ledger: a local folder, or a bucket of the project's
    S3 server (``server``, a :class:`devservices.s3_server.S3Server`), which the ``store_down`` rounds stop and
    start again."""

    storage: str
    lake_root: str
    checkpoint_root: str
    env: dict[str, str]
    """What every run's environment gets: the roots, and for a bucket the server's AWS variables."""
    server: Any = None

    @classmethod
    def local(cls, work: Path) -> Lake:
        return cls("local", str(work / "lake"), str(work / "checkpoints"), {
            "SLUICE_LAKE_ROOT": str(work / "lake"), "SLUICE_CHECKPOINT_ROOT": str(work / "checkpoints"),
            "SLUICE_LEDGER": str(work / "lake" / "_sluice" / "ledger"),
            # appended to the driver's class path (spark.driver.extraClassPath would go first, and the JVM
            # class archive, sluice.launch.jvm_archive, only applies to a class path that starts as it did at set-up)
            "SPARK_DIST_CLASSPATH": str(chaos_jar())})

    @classmethod
    def on_server(cls, server: Any, bucket: str) -> Lake:
        root = f"s3a://{bucket}"
        return cls("s3", f"{root}/lake", f"{root}/checkpoints", {
            **server.env(), "SLUICE_LAKE_ROOT": f"{root}/lake", "SLUICE_CHECKPOINT_ROOT": f"{root}/checkpoints",
            "SLUICE_LEDGER": f"{root}/lake/_sluice/ledger", "SLUICE_LOCK_LEASE_SECONDS": str(LEASE_SECONDS),
            # the fault-injecting S3A extends S3A: both on the JVM's own class path, in one class loader
            "SPARK_DIST_CLASSPATH": os.pathsep.join([str(chaos_jar()), str(load_settings().jars_dir / "s3" / "*")])},
            server)

    @property
    def store(self) -> ObjectStore:
        return ObjectStore.from_env(self.env)

    def key(self, uri: str) -> str:
        """The path the fault-injecting file system matches: the folder's, or the object key's with a slash."""
        return "/" + bucket_and_key(uri)[1] if self.storage == "s3" else uri

    def write(self, uri: str, text: str) -> None:
        """A landing file, whole at once (a rename into place on disk, one put in a bucket)."""
        if self.storage == "s3":
            bucket, key = bucket_and_key(uri)
            with self.store.arrow().open_output_stream(f"{bucket}/{key}") as out:
                out.write(text.encode("utf-8"))
            return
        path = Path(uri)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(path)

    def rows(self, uri: str, columns: list[str]) -> list[dict[str, Any]] | None:
        """A Delta table's rows (delta-rs: no JVM), None when there is no table."""
        from deltalake import DeltaTable
        from deltalake.exceptions import TableNotFoundError

        location, options = delta_rs_location(uri, self.store)
        try:
            table = DeltaTable(location, storage_options=options)
        except TableNotFoundError:
            return None
        return table.to_pyarrow_table(columns=columns).to_pylist()

    def stop_store(self) -> None:
        from devservices.s3_server import stop_server

        stop_server(self.server, crash=True)

    def start_store(self) -> None:
        """The same server again (its folder, ports and data); the caller's server object follows it."""
        from devservices.s3_server import start_server

        again = start_server(self.server.home, load_settings().var_dir, port=self.server.port)
        self.server.pid = again.pid


@dataclass
class Pipeline:
    """One pipeline under test, its input so far, and what its two tables must hold."""

    kind: str
    lake: Lake
    rng: random.Random
    bootstrap: str | None = None
    next_id: int = 0
    next_bad_id: int = BAD_ID_BASE
    produced: int = 0
    # append pipelines: every good id produced; merge: id -> latest version, or None once deleted
    expected: dict[int, int | None] = field(default_factory=dict)
    bad: set[int] = field(default_factory=set)
    """Ids of the bad records produced: each must be in the quarantine table exactly once."""
    round: int = 0

    @property
    def name(self) -> str:
        return f"chaos_{self.kind}"

    topic_suffix: str = ""

    @property
    def landing(self) -> str:
        return f"{self.lake.lake_root}/landing/{self.name}"

    @property
    def topic(self) -> str:
        return f"{self.name}_{self.topic_suffix}"

    @property
    def sink(self) -> str:
        return f"{self.lake.lake_root}/{self.name}"

    @property
    def quarantine(self) -> str:
        return f"{self.lake.lake_root}/_quarantine/{self.name}"

    @property
    def checkpoint(self) -> str:
        return f"{self.lake.checkpoint_root}/{self.name}"

    def modes(self, wanted: list[str]) -> list[str]:
        """The kill modes that exist for this pipeline's write path."""
        return [m for m in wanted if (self.kind == "files" or m not in ONE_PASS_MODES)
                and (self.kind != "kafka" or m not in FILE_SOURCE_MODES)]

    def spec(self) -> dict[str, Any]:
        spec: dict[str, Any] = {
            "name": self.name, "spark_conf": chaos_spark_conf(self.lake.storage),
            "expectations": [{"name": "positive_amount", "rule": "amount > 0", "on_violation": "quarantine"}],
        }
        if self.kind == "kafka":
            spec["source"] = {
                "format": "kafka", "bootstrap_servers": self.bootstrap, "topics": [self.topic],
                "value": {"format": "json", "schema": "id BIGINT, payload STRING, amount DOUBLE"},
            }
            spec["transform"] = {"sql": "SELECT id, payload, amount, partition, offset FROM source"}
            # never trips; anything set to fail keeps the batch on the counted path (quarantine first)
            spec["expectations"].append({"name": "known_id", "rule": "id >= 0", "on_violation": "fail"})
        elif self.kind == "files":
            # its files' names sort as they land (round-0001.json): listed after the last run's mark
            spec["source"] = {"format": "json", "path": f"landing/{self.name}",
                              "schema": "id BIGINT, payload STRING, amount DOUBLE", "max_files_per_trigger": 2,
                              "listing": "incremental", "look_back": "0s"}
        else:
            spec["source"] = {"format": "json", "path": f"landing/{self.name}",
                              "schema": "id BIGINT, version BIGINT, op STRING, amount DOUBLE"}
            spec["sink"] = {"mode": "merge", "keys": ["id"], "order_by": "version", "delete_when": "op = 'D'"}
        return spec

    def produce(self) -> None:
        self.round += 1
        if self.kind == "merge":
            records = [json.dumps({**r, "amount": 1.0}) for r in self._changes()]
        else:
            good = [{"id": self.next_id + i, "payload": f"r{self.round}", "amount": 1.0} for i in range(ROWS_PER_ROUND)]
            for record in good:
                self.expected[record["id"]] = 1
            self.next_id += ROWS_PER_ROUND
            records = [json.dumps(r) for r in good]
        records += self._bad_records()
        self.rng.shuffle(records)
        self.produced += len(records)
        if self.kind == "kafka":
            from confluent_kafka import Producer

            producer = Producer({"bootstrap.servers": self.bootstrap, "enable.idempotence": True})
            for n, record in enumerate(records):
                producer.produce(self.topic, key=f"{self.round}-{n}", value=record)
            if producer.flush(30) != 0:
                raise RuntimeError("the Kafka producer could not deliver every record in 30 s")
        else:
            self.lake.write(f"{self.landing}/round-{self.round:04d}.json", "".join(r + "\n" for r in records))

    def _bad_records(self) -> list[str]:
        """Malformed JSON, a wrong type, an expectation violated: each names its id in its text, which the
        quarantine table keeps (``raw``)."""
        records = []
        for n in range(BAD_PER_ROUND):
            if self.kind == "merge":
                key, self.next_bad_id = self.next_bad_id, self.next_bad_id + 1
                fields = {"id": key, "version": 1, "op": "I"}
            else:
                key, self.next_id = self.next_id, self.next_id + 1
                fields = {"id": key, "payload": f"r{self.round}"}
            self.bad.add(key)
            whole = json.dumps({**fields, "amount": 1.0})
            if n % 3 == 0:
                records.append(whole[: whole.index('"amount"') + 5])  # truncated mid-field: not JSON
            elif n % 3 == 1:
                records.append(json.dumps({**fields, "amount": "lots"}))  # a text for a DOUBLE
            else:
                records.append(json.dumps({**fields, "amount": -1.0}))  # violates positive_amount
        return records

    def _changes(self) -> list[dict[str, Any]]:
        """New keys, then updates (several per key, out of order) and deletions of live keys."""
        changes = []
        for _ in range(ROWS_PER_ROUND // 2):
            changes.append({"id": self.next_id, "version": 1, "op": "I"})
            self.expected[self.next_id] = 1
            self.next_id += 1
        live = [k for k, v in self.expected.items() if v is not None]
        for key in self.rng.sample(live, min(len(live), ROWS_PER_ROUND // 3)):
            top = self.expected[key] + self.rng.randint(1, 3)
            versions = list(range(self.expected[key] + 1, top + 1))
            self.rng.shuffle(versions)  # the latest version is not always the last line
            changes += [{"id": key, "version": v, "op": "U"} for v in versions]
            self.expected[key] = top
        live = [k for k, v in self.expected.items() if v is not None]
        for key in self.rng.sample(live, min(len(live), ROWS_PER_ROUND // 20)):
            version = self.expected[key] + 1
            changes.append({"id": key, "version": version, "op": "D"})
            self.expected[key] = None
        self.rng.shuffle(changes)
        return changes

    def halt_pattern(self, mode: str) -> tuple[str, str] | None:
        """The fault-injecting file system's variable and the path it halts before, for an exact mode."""
        sink, quarantine = self.lake.key(self.sink), self.lake.key(self.quarantine)
        checkpoint = self.lake.key(self.checkpoint)
        return {
            "before_offsets": (HALT_ENV, f"^{checkpoint}/offsets/\\d+$"),
            "before_index_list": (HALT_ENV, f"^{checkpoint}/sources/0/\\d+$"),
            "before_listing_marks": (HALT_ENV, f"^{checkpoint}/sources/0/index/marks$"),
            "before_commit": (HALT_ENV, f"^{sink}/_delta_log/\\d+\\.json$"),
            "between_commits": (HALT_ENV, f"^{checkpoint}/commits/\\d+$"),
            "before_quarantine_commit": (HALT_ENV, f"^{quarantine}/_delta_log/\\d+\\.json$"),
            "before_marker_write": (HALT_ENV, f"^{checkpoint}/sluice_quarantine_pending$"),
            "before_marker_clear": (HALT_DELETE_ENV, f"^{checkpoint}/sluice_quarantine_pending$"),
        }.get(mode)

    def compare(self) -> dict[str, int]:
        """Both tables against what was produced, by id."""
        counts: dict[int, int] = {}
        versions: dict[int, int] = {}
        for row in self.lake.rows(self.sink, ["id", "version"] if self.kind == "merge" else ["id"]) or []:
            counts[row["id"]] = counts.get(row["id"], 0) + 1
            if self.kind == "merge":
                versions[row["id"]] = row["version"]
        duplicated = sum(n - 1 for n in counts.values() if n > 1)
        if self.kind == "merge":
            live = {k: v for k, v in self.expected.items() if v is not None}
            lost = sum(1 for k in live if k not in counts)
            stale = sum(1 for k, v in live.items() if k in versions and versions[k] != v)
            stale += sum(1 for k, v in self.expected.items() if v is None and k in counts)  # deleted, back again
        else:
            lost = sum(1 for k in self.expected if k not in counts)
            stale = 0
        unexpected = sum(1 for k in counts if k not in self.expected)  # a bad record in the sink counts here
        quarantined: dict[int, int] = {}
        unknown = 0
        for row in self.lake.rows(self.quarantine, ["raw"]) or []:
            found = ID_IN_RAW.search(row["raw"] or "")
            if found is None:
                unknown += 1
            else:
                key = int(found.group(1))
                quarantined[key] = quarantined.get(key, 0) + 1
        return {
            "rows": sum(counts.values()), "lost": lost, "duplicated": duplicated, "stale": stale,
            "unexpected": unexpected,
            "quarantine_rows": sum(quarantined.values()) + unknown,
            "quarantine_lost": sum(1 for k in self.bad if k not in quarantined),
            "quarantine_duplicated": sum(n - 1 for n in quarantined.values() if n > 1),
            # a good record set aside, or a row that names no produced bad record
            "quarantine_stale": sum(1 for k in quarantined if k not in self.bad) + unknown,
        }


ID_IN_RAW = re.compile(r'"id":\s*(\d+)')


class Harness:
    def __init__(self, work: Path, seed: int, kinds: list[str], modes: list[str], bootstrap: str | None = None,
                 lake: Lake | None = None, clean_run: Any = None):
        """``clean_run``: how the run after a kill is made, ``clean_run(spec_path, environment) -> summary``
        (the test suite makes it in its own Spark session: the run under test is the killed one); by default
        ``sluice run``, a spark-submit like the killed run."""
        self.work = work
        self.clean_run = clean_run
        self.rng = random.Random(seed)
        self.modes = modes
        self.lake = lake or Lake.local(work)
        # Spark's scratch (~35 MB of copied jars per driver) in the work folder: a killed driver leaves its own
        # behind, hundreds per chaos run, and the work folder is deleted at the end.
        self.env = {**os.environ, **self.lake.env, "SLUICE_PIPELINES": str(work / "pipelines"),
                    "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_LOCAL_DIRS": str(work / "spark-scratch")}
        (work / "spark-scratch").mkdir(parents=True, exist_ok=True)
        (work / "pipelines").mkdir(parents=True, exist_ok=True)
        self.broker = None
        if "kafka" in kinds and bootstrap is None:
            from devservices.kafka_broker import start_broker

            self.broker = start_broker(work / "kafka", load_settings().jars_dir)
            bootstrap = self.broker.bootstrap_servers
        self.pipelines = [Pipeline(k, self.lake, random.Random(self.rng.random()), bootstrap=bootstrap,
                                   topic_suffix=work.name) for k in kinds]
        for pipeline in self.pipelines:
            if pipeline.kind == "kafka":
                from devservices.kafka_broker import create_topic

                create_topic(bootstrap, pipeline.topic, 3)
            (work / "pipelines" / f"{pipeline.name}.yaml").write_text(yaml.safe_dump(pipeline.spec()), encoding="utf-8")
        self.clean_wall: dict[str, float] = {}
        self.results: dict[str, dict[str, Any]] = {
            p.kind: {"rounds": 0, "kills": {m: 0 for m in MODES}, "missed_by_mode": {m: 0 for m in MODES},
                     **{o: 0 for o in OUTCOMES}, "replayed_batches": 0, "failures": [], "never_fired": [],
                     "store_down": []}
            for p in self.pipelines
        }

    def close(self) -> None:
        if self.broker is not None:
            from devservices.kafka_broker import stop_broker

            stop_broker(self.broker)

    def _start(self, pipeline: Pipeline, halt: tuple[str, str] | None,
               pause: tuple[str, Path] | None = None) -> subprocess.Popen:
        env = {k: v for k, v in self.env.items() if k not in (HALT_ENV, HALT_DELETE_ENV, PAUSE_ENV, PAUSE_FILE_ENV)}
        if halt:
            env[halt[0]] = halt[1]
        if pause:
            env[PAUSE_ENV], env[PAUSE_FILE_ENV] = pause[0], str(pause[1])
        return subprocess.Popen(
            [str(BIN / "sluice"), "run", pipeline.name], env=env, cwd=HOME,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            start_new_session=True,  # its own process group: kill -9 reaches spark-submit and the driver
        )

    def run_clean(self, pipeline: Pipeline) -> dict[str, Any]:
        """A run to its end. A run refused because the killed run's lock still holds is started again, as an
        Airflow retry would: in a bucket the lock holds until its lease ends (:data:`LEASE_SECONDS`); on a local
        disk until the killed driver's process has ended, which a loaded machine takes a moment to do after
        the kill (seen: the next run refused, "pipeline chaos_merge is already running")."""
        started = time.monotonic()
        patience = 4 * LEASE_SECONDS if self.lake.storage == "s3" else 60

        def refused(error: str | None) -> bool:
            return "is already running" in (error or "") and time.monotonic() - started < patience

        if self.clean_run is not None:
            while True:
                summary = self.clean_run(self.work / "pipelines" / f"{pipeline.name}.yaml", self.env)
                if summary.get("status") == "succeeded" or not refused(summary.get("error")):
                    break
                time.sleep(1)
            self.clean_wall[pipeline.kind] = time.monotonic() - started
            if summary.get("status") != "succeeded":
                raise RuntimeError(f"{pipeline.name}: the run after the kill failed: {summary.get('error')}")
            return summary
        while True:
            proc = self._start(pipeline, None)
            out, err = proc.communicate(timeout=600)
            if proc.returncode == 0 or not refused(err):
                break
            time.sleep(LEASE_SECONDS / 4 if self.lake.storage == "s3" else 1)
        self.clean_wall[pipeline.kind] = time.monotonic() - started
        if proc.returncode != 0:
            raise RuntimeError(f"{pipeline.name}: the run after the kill failed (exit {proc.returncode}):\n{err[-3000:]}")
        return json.loads(out.strip().splitlines()[-1])

    def kill_run(self, pipeline: Pipeline, mode: str) -> str:
        """Start a run, kill it as ``mode`` says, and say what happened: one of :data:`OUTCOMES`."""
        halt = pipeline.halt_pattern(mode)
        proc = self._start(pipeline, halt)
        if halt is None:  # random: kill -9 of the whole tree after a random delay
            delay = pipeline.rng.uniform(0.5, 1.1 * self.clean_wall.get(pipeline.kind, 20.0))
            try:
                proc.wait(timeout=delay)
            except subprocess.TimeoutExpired:
                pass
            running = proc.poll() is None
            _kill_tree(proc)
            out, _ = proc.communicate()
            # still running, and it had not printed its summary (the last thing it does): killed mid-run
            return "killed_in_flight" if running and not _summary_printed(out) else "missed"
        try:
            proc.wait(timeout=600)
        except subprocess.TimeoutExpired:
            _kill_tree(proc)
            raise RuntimeError(f"{pipeline.name}: a {mode} run neither halted nor ended in 600 s") from None
        _kill_tree(proc)  # whatever is left of a halted run
        out, err = proc.communicate()
        if HALT_LINE in err and "exited with code 137" in err:
            return "halted"
        if proc.returncode == 0:
            return "missed"  # the halt point was never reached: the run finished
        raise RuntimeError(f"{pipeline.name}: a {mode} run failed without halting (exit {proc.returncode}):\n"
                           f"{err[-3000:]}")

    def round(self, pipeline: Pipeline, mode: str) -> str:
        """One round: new input, a run killed as ``mode`` says, a clean run. Returns the kill's outcome."""
        pipeline.produce()
        outcome = self.kill_run(pipeline, mode)
        summary = self.run_clean(pipeline)
        result = self.results[pipeline.kind]
        result[outcome] += 1
        if outcome == "missed":
            result["missed_by_mode"][mode] += 1
        else:
            result["rounds"] += 1
            result["kills"][mode] += 1
        result["replayed_batches"] += len(summary.get("skipped_batches") or [])
        return outcome

    def store_down_round(self, pipeline: Pipeline) -> dict[str, Any]:
        """New input; a run paused right before its sink's Delta commit; the store stopped (killed) in that
        pause; the run must fail within :data:`STORE_DOWN_BOUND_SECONDS` and name the store; the store started
        again, a clean run. Returns what was seen (``ok`` False and ``why`` when the run did not fail so)."""
        pipeline.produce()
        flag = self.work / f"paused-{pipeline.kind}-{pipeline.round}"
        flag.unlink(missing_ok=True)
        proc = self._start(pipeline, None, pause=(f"^{self.lake.key(pipeline.sink)}/_delta_log/\\d+\\.json$", flag))
        deadline = time.monotonic() + 600
        while not flag.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        if not flag.exists():
            _kill_tree(proc)
            out, err = proc.communicate()
            raise RuntimeError(f"{pipeline.name}: the run never paused before its Delta commit "
                               f"(exit {proc.returncode}):\n{err[-3000:]}")
        self.lake.stop_store()
        stopped = time.monotonic()
        flag.unlink()  # the run goes on, into a store that does not answer
        try:
            out, err = proc.communicate(timeout=STORE_DOWN_BOUND_SECONDS + 300)
        except subprocess.TimeoutExpired:
            _kill_tree(proc)
            out, err = proc.communicate()
        seconds = round(time.monotonic() - stopped, 1)
        self.lake.start_store()
        summary = _last_json(out) or {}
        error = str(summary.get("error") or "")
        seen = {"round": pipeline.round, "exit": proc.returncode, "seconds_to_fail": seconds, "error": error[:400]}
        why = ("the run did not fail" if proc.returncode == 0 else
               f"it failed after {seconds} s (bound {STORE_DOWN_BOUND_SECONDS} s)" if seconds > STORE_DOWN_BOUND_SECONDS
               else f"its error does not say {STORE_DOWN_LINE!r}" if STORE_DOWN_LINE not in error else None)
        if why:
            seen["why"], seen["stderr"] = why, err[-2000:]
        self.run_clean(pipeline)
        return {**seen, "ok": why is None}

    def run(self, rounds: int, plan: dict[str, list[str]] | None = None, parallel: bool = False,
            store_down_rounds: int = 0) -> dict[str, dict[str, Any]]:
        """``rounds`` counted rounds per pipeline, each with a kill mode drawn at random; or, with ``plan``,
        the kill modes given per pipeline kind, in order (the test suite's short, deterministic version).
        A round whose kill missed (the run finished first) is drawn again, up to ``rounds`` more times.
        ``parallel``: the pipelines' rounds run at the same time, one thread each (runs of different
        pipelines overlap, as they do in production; on 2 cores the whole takes about half the time).
        Then, in a bucket, ``store_down_rounds`` per pipeline, one pipeline at a time."""
        if parallel:
            import threading

            errors: list[BaseException] = []

            def worker(pipeline: Pipeline) -> None:
                try:
                    self._rounds_of(pipeline, rounds, plan)
                except BaseException as err:  # noqa: BLE001 - re-raised in the main thread
                    errors.append(err)

            threads = [threading.Thread(target=worker, args=(p,), name=f"chaos-{p.kind}") for p in self.pipelines]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            if errors:
                raise errors[0]
        else:
            for pipeline in self.pipelines:
                self._rounds_of(pipeline, rounds, plan)
        if store_down_rounds and self.lake.storage != "s3":
            raise ValueError("store_down rounds stop an object store: run them with a bucket (--storage s3)")
        for pipeline in self.pipelines:
            for n in range(store_down_rounds):
                seen = self.store_down_round(pipeline)
                check = pipeline.compare()
                log(f"{pipeline.kind} store_down {n + 1}/{store_down_rounds}: {seen} {check}")
                self.results[pipeline.kind]["store_down"].append(seen)
                if not seen["ok"] or any(check[k] for k in BAD_COUNTS):
                    self.results[pipeline.kind]["failures"].append({"mode": "store_down", **seen, **check})
        for pipeline in self.pipelines:
            result = self.results[pipeline.kind]
            result.update(pipeline.compare())
            result["produced"] = pipeline.produced
            # a halt mode that was tried and never stopped a run proves nothing: the harness is wrong
            result["never_fired"] = [m for m in MODES if m != "random" and result["missed_by_mode"][m]
                                     and not result["kills"][m]]
        return self.results

    def _rounds_of(self, pipeline: Pipeline, rounds: int, plan) -> None:
        if plan is not None:
            modes = list(plan.get(pipeline.kind, []))
        else:
            choices = pipeline.modes(self.modes)
            modes = [pipeline.rng.choice(choices) for _ in range(rounds)]
        if "random" in modes:
            pipeline.produce()
            self.run_clean(pipeline)  # a first, clean run: how long a run takes, for random kill times
        redraws = len(modes)
        n = 0
        while n < len(modes):
            mode = modes[n]
            outcome = self.round(pipeline, mode)
            check = pipeline.compare()
            log(f"{pipeline.kind} round {n + 1}/{len(modes)} ({mode}, {outcome}): {check}")
            if any(check[k] for k in BAD_COUNTS):
                self.results[pipeline.kind]["failures"].append({"round": n + 1, "mode": mode, **check})
            # a missed kill is not a round: draw it again (a plan's random kill: the same mode again); a planned
            # halt that missed is not retried: it shows in never_fired
            if outcome == "missed" and redraws > 0 and (plan is None or mode == "random"):
                redraws -= 1
                if plan is None:
                    modes[n] = pipeline.rng.choice(pipeline.modes(self.modes))
                continue
            n += 1


BAD_COUNTS = ("lost", "duplicated", "stale", "unexpected", "quarantine_lost", "quarantine_duplicated",
              "quarantine_stale")


def _kill_tree(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _last_json(out: str) -> dict[str, Any] | None:
    """The run summary: `sluice run`'s last stdout line, when it printed one."""
    lines = (out or "").strip().splitlines()
    try:
        data = json.loads(lines[-1]) if lines else None
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def _summary_printed(out: str) -> bool:
    return "status" in (_last_json(out) or {})


def table_of(results: dict[str, dict[str, Any]]) -> str:
    header = ["pipeline", "rounds", "halted", "killed_in_flight", "missed", "replays", "produced", "sink rows",
              "quarantine rows", "lost (sink / quarantine)", "duplicated (sink / quarantine)",
              "stale (sink / quarantine)"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for kind, r in results.items():
        cells = [kind, r["rounds"], r["halted"], r["killed_in_flight"], r["missed"], r["replayed_batches"],
                 r["produced"], r["rows"], r["quarantine_rows"], f"{r['lost']} / {r['quarantine_lost']}",
                 f"{r['duplicated']} / {r['quarantine_duplicated']}",
                 f"{r['stale'] + r['unexpected']} / {r['quarantine_stale']}"]
        lines.append("| " + " | ".join(str(c) for c in cells) + " |")
    kills = ["", "| pipeline | " + " | ".join(MODES) + " |", "|" + "---|" * (len(MODES) + 1)]
    for kind, r in results.items():
        kills.append(f"| {kind} | " + " | ".join(f"{r['kills'][m]} ({r['missed_by_mode'][m]} missed)" for m in MODES)
                     + " |")
    down = [(kind, r["store_down"]) for kind, r in results.items() if r.get("store_down")]
    if down:
        kills += ["", f"| pipeline | store stopped mid-run | failed naming the store | seconds to fail (bound "
                      f"{STORE_DOWN_BOUND_SECONDS}) |", "|---|---|---|---|"]
        for kind, seen in down:
            kills.append(f"| {kind} | {len(seen)} | {sum(s['ok'] for s in seen)} | "
                         f"{', '.join(str(s['seconds_to_fail']) for s in seen)} |")
    return "\n".join(lines + kills)


def failed(results: dict[str, dict[str, Any]]) -> bool:
    return any(any(r[k] for k in BAD_COUNTS) or r["failures"] or r["never_fired"] for r in results.values())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=50, help="rounds per pipeline (default 50)")
    parser.add_argument("--pipelines", default=",".join(PIPELINES), help="files,kafka,merge")
    parser.add_argument("--modes", default=",".join(MODES), help=",".join(MODES))
    parser.add_argument("--seed", type=int, default=20261123)
    parser.add_argument("--keep", action="store_true", help="keep the work folder (tables, checkpoints)")
    parser.add_argument("--parallel", action="store_true",
                        help="run the pipelines' rounds at the same time (one thread per pipeline)")
    parser.add_argument("--storage", default="local", choices=STORAGES,
                        help="local disk, or a bucket of the project's S3 server started for the run (s3)")
    parser.add_argument("--store-down-rounds", type=int, default=2,
                        help="with --storage s3: rounds per pipeline that stop the store mid-run (default 2)")
    args = parser.parse_args(argv)
    kinds = [k for k in args.pipelines.split(",") if k]
    modes = [m for m in args.modes.split(",") if m]
    bad = [k for k in kinds if k not in PIPELINES] + [m for m in modes if m not in MODES]
    if bad:
        parser.error(f"unknown pipeline or mode: {', '.join(bad)}; pipelines: {', '.join(PIPELINES)}; "
                     f"modes: {', '.join(MODES)}")
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    work = Path(tempfile.mkdtemp(prefix="sluice-chaos-", dir=HOME / "var"))
    server = None
    lake = None
    if args.storage == "s3":
        from devservices.kafka_broker import free_port
        from devservices.s3_server import create_bucket, start_server

        server = start_server(work / "s3", load_settings().var_dir, port=free_port())
        create_bucket(server, "chaos")
        lake = Lake.on_server(server, "chaos")
    started = time.monotonic()
    try:
        harness = Harness(work, args.seed, kinds, modes, lake=lake)
        try:
            results = harness.run(args.rounds, parallel=args.parallel,
                                  store_down_rounds=args.store_down_rounds if server else 0)
        finally:
            harness.close()
    finally:
        if server is not None:
            from devservices.s3_server import stop_server

            stop_server(server, crash=True)
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    table = table_of(results)
    print(table)
    RESULTS.mkdir(parents=True, exist_ok=True)
    stem = "chaos" if args.storage == "local" else f"chaos-{args.storage}"
    (RESULTS / f"{stem}.json").write_text(json.dumps(
        {"rounds": args.rounds, "seed": args.seed, "modes": modes, "parallel": args.parallel,
         "storage": args.storage, "minutes": round((time.monotonic() - started) / 60, 1), "results": results},
        indent=2), encoding="utf-8")
    (RESULTS / f"{stem}.md").write_text(table + "\n", encoding="utf-8")
    if failed(results):
        print(f"chaos: records were lost, duplicated or stale, a halt mode never fired, or a run did not fail as "
              f"it should when the store stopped (see the table and {stem}.json)", file=sys.stderr)
        return 1
    print(f"chaos: 0 lost, 0 duplicated, 0 stale in both tables over {args.rounds} rounds per pipeline "
          f"({args.storage})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
