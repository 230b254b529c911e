"""`make chaos`: kill sluice runs at random moments and prove that no record is lost or duplicated.

For each pipeline (files -> Delta append, Kafka -> Delta append, files -> Delta MERGE with CDC updates and
deletes), every round:

1. produces new input (unique ids; for MERGE: new keys, updates with a higher version, deletions);
2. starts `sluice run` and kills it with one of the kill modes below;
3. runs `sluice run` again, to completion;
4. compares the table with everything produced so far, by id: lost, duplicated, stale (MERGE: a key whose
   row is not its latest version, or a deleted key that came back).

Kill modes (``--modes``; a round picks one at random):

  random           kill -9 of the whole process tree (launcher, spark-submit JVM, Python driver) after a
                   random delay, anywhere from start-up to the end of the run
  before_offsets   the JVM halts before the checkpoint's offsets/N is written (batch planned, nothing read)
  before_commit    the JVM halts before the sink's Delta commit (data files written, not committed)
  between_commits  the JVM halts after the Delta commit, before the checkpoint's commits/N: the replay case

The three exact moments come from a fault-injecting local file system (jvm/chaos, built at set-up into
var/jars/chaos/sluice-chaos.jar) that halts the JVM -- like kill -9, no shutdown hooks -- just before a file
is renamed into place: Spark's checkpoint logs and Delta's log are both written that way.

    python bench/chaos.py [--rounds 50] [--pipelines files,kafka,merge] [--modes ...] [--seed N]

Prints a table (and writes bench/results/chaos.json); exits 1 on any lost, duplicated or stale record, or
on a run that did not complete after a kill.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HOME = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(HOME))

import yaml  # noqa: E402

from sluice.settings import load_settings  # noqa: E402

BIN = Path(sys.executable).parent
RESULTS = HOME / "bench" / "results"
MODES = ("random", "before_offsets", "before_commit", "between_commits")
PIPELINES = ("files", "kafka", "merge")
HALT_ENV = "SLUICE_CHAOS_HALT_BEFORE"
ROWS_PER_ROUND = 300


def log(message: str) -> None:
    print(f"[chaos] {message}", file=sys.stderr, flush=True)


def chaos_jar() -> Path:
    jar = load_settings().jars_dir / "chaos" / "sluice-chaos.jar"
    if not jar.is_file():
        raise FileNotFoundError(f"{jar} is missing: run `make install` (it builds jvm/chaos)")
    return jar


def chaos_spark_conf() -> dict[str, str]:
    """The spec's spark_conf that plugs the fault-injecting file system into a run (its jar is on the
    driver's class path through SPARK_DIST_CLASSPATH, see Harness)."""
    return {"spark.hadoop.fs.AbstractFileSystem.file.impl": "dev.sluice.chaos.HaltingLocalFs"}


@dataclass
class Pipeline:
    """One pipeline under test, its input so far, and what its table must hold."""

    kind: str
    work: Path
    rng: random.Random
    bootstrap: str | None = None
    next_id: int = 0
    produced: int = 0
    # append pipelines: every id produced; merge: id -> latest version, or None once deleted
    expected: dict[int, int | None] = field(default_factory=dict)
    round: int = 0

    @property
    def name(self) -> str:
        return f"chaos_{self.kind}"

    @property
    def landing(self) -> Path:
        return self.work / "lake" / "landing" / self.name

    @property
    def topic(self) -> str:
        return f"{self.name}_{self.work.name}"

    def spec(self) -> dict[str, Any]:
        spec: dict[str, Any] = {"name": self.name, "spark_conf": chaos_spark_conf()}
        if self.kind == "kafka":
            spec["source"] = {
                "format": "kafka", "bootstrap_servers": self.bootstrap, "topics": [self.topic],
                "value": {"format": "json", "schema": "id BIGINT, payload STRING"},
            }
            spec["transform"] = {"sql": "SELECT id, payload, partition, offset FROM source"}
        elif self.kind == "files":
            spec["source"] = {"format": "json", "path": f"landing/{self.name}", "schema": "id BIGINT, payload STRING",
                              "max_files_per_trigger": 2}
        else:
            spec["source"] = {"format": "json", "path": f"landing/{self.name}",
                              "schema": "id BIGINT, version BIGINT, op STRING"}
            spec["sink"] = {"mode": "merge", "keys": ["id"], "order_by": "version", "delete_when": "op = 'D'"}
        return spec

    def produce(self) -> None:
        self.round += 1
        if self.kind == "merge":
            records = self._changes()
        else:
            records = [{"id": self.next_id + i, "payload": f"r{self.round}"} for i in range(ROWS_PER_ROUND)]
            for record in records:
                self.expected[record["id"]] = 1
            self.next_id += ROWS_PER_ROUND
        self.produced += len(records)
        if self.kind == "kafka":
            from confluent_kafka import Producer

            producer = Producer({"bootstrap.servers": self.bootstrap, "enable.idempotence": True})
            for record in records:
                producer.produce(self.topic, key=str(record["id"]), value=json.dumps(record))
            if producer.flush(30) != 0:
                raise RuntimeError("the Kafka producer could not deliver every record in 30 s")
        else:
            self.landing.mkdir(parents=True, exist_ok=True)
            tmp = self.landing / f".round-{self.round:04d}.json.tmp"
            tmp.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
            tmp.replace(self.landing / f"round-{self.round:04d}.json")

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

    def halt_pattern(self, mode: str, settings_env: dict[str, str]) -> str | None:
        sink = Path(settings_env["SLUICE_LAKE_ROOT"]) / self.name
        checkpoint = Path(settings_env["SLUICE_CHECKPOINT_ROOT"]) / self.name
        return {
            "before_offsets": f"^{checkpoint}/offsets/\\d+$",
            "before_commit": f"^{sink}/_delta_log/\\d+\\.json$",
            "between_commits": f"^{checkpoint}/commits/\\d+$",
        }.get(mode)

    def compare(self, spark) -> dict[str, int]:
        table = spark.read.format("delta").load(str(self.work / "lake" / self.name))
        counts: dict[int, int] = {}
        versions: dict[int, int] = {}
        for row in table.collect():
            counts[row.id] = counts.get(row.id, 0) + 1
            if self.kind == "merge":
                versions[row.id] = row.version
        duplicated = sum(n - 1 for n in counts.values() if n > 1)
        if self.kind == "merge":
            live = {k: v for k, v in self.expected.items() if v is not None}
            lost = sum(1 for k in live if k not in counts)
            stale = sum(1 for k, v in live.items() if k in versions and versions[k] != v)
            stale += sum(1 for k, v in self.expected.items() if v is None and k in counts)  # deleted, back again
            unexpected = sum(1 for k in counts if k not in self.expected)
        else:
            lost = sum(1 for k in self.expected if k not in counts)
            stale = 0
            unexpected = sum(1 for k in counts if k not in self.expected)
        return {"rows": sum(counts.values()), "lost": lost, "duplicated": duplicated,
                "stale": stale, "unexpected": unexpected}


class Harness:
    def __init__(self, work: Path, seed: int, kinds: list[str], modes: list[str], bootstrap: str | None = None):
        self.work = work
        self.rng = random.Random(seed)
        self.modes = modes
        self.env = {
            **os.environ,
            "SLUICE_LAKE_ROOT": str(work / "lake"),
            "SLUICE_CHECKPOINT_ROOT": str(work / "checkpoints"),
            "SLUICE_PIPELINES": str(work / "pipelines"),
            "SLUICE_LEDGER": str(work / "lake" / "_sluice" / "ledger"),
            "SPARK_LOCAL_IP": "127.0.0.1",
            # appended to the driver's class path (spark.driver.extraClassPath would go first, and the JVM
            # class archive, sluice.jvm_archive, only applies to a class path that starts as it did at set-up)
            "SPARK_DIST_CLASSPATH": str(chaos_jar()),
        }
        self.env.pop(HALT_ENV, None)
        (work / "pipelines").mkdir(parents=True, exist_ok=True)
        self.broker = None
        if "kafka" in kinds and bootstrap is None:
            from sluice.kafka_broker import start_broker

            self.broker = start_broker(work / "kafka", load_settings().jars_dir)
            bootstrap = self.broker.bootstrap_servers
        self.pipelines = [Pipeline(k, work, random.Random(self.rng.random()), bootstrap=bootstrap) for k in kinds]
        for pipeline in self.pipelines:
            if pipeline.kind == "kafka":
                from sluice.kafka_broker import create_topic

                create_topic(bootstrap, pipeline.topic, 3)
            (work / "pipelines" / f"{pipeline.name}.yaml").write_text(yaml.safe_dump(pipeline.spec()), encoding="utf-8")
        self.clean_wall: dict[str, float] = {}
        self.results: dict[str, dict[str, Any]] = {
            p.kind: {"rounds": 0, "kills": {m: 0 for m in MODES}, "replayed_batches": 0, "failures": []}
            for p in self.pipelines
        }

    def close(self) -> None:
        if self.broker is not None:
            from sluice.kafka_broker import stop_broker

            stop_broker(self.broker)

    def _start(self, pipeline: Pipeline, halt: str | None) -> subprocess.Popen:
        env = dict(self.env)
        if halt:
            env[HALT_ENV] = halt
        return subprocess.Popen(
            [str(BIN / "sluice"), "run", pipeline.name], env=env, cwd=HOME,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            start_new_session=True,  # its own process group: kill -9 reaches spark-submit and the driver
        )

    def run_clean(self, pipeline: Pipeline) -> dict[str, Any]:
        started = time.monotonic()
        proc = self._start(pipeline, None)
        out, err = proc.communicate(timeout=600)
        self.clean_wall[pipeline.kind] = time.monotonic() - started
        if proc.returncode != 0:
            raise RuntimeError(f"{pipeline.name}: the run after the kill failed (exit {proc.returncode}):\n{err[-3000:]}")
        return json.loads(out.strip().splitlines()[-1])

    def kill_run(self, pipeline: Pipeline, mode: str) -> None:
        halt = pipeline.halt_pattern(mode, self.env)
        proc = self._start(pipeline, halt)
        if mode == "random":
            time.sleep(pipeline.rng.uniform(0.5, 1.1 * self.clean_wall.get(pipeline.kind, 20.0)))
        try:
            proc.wait(timeout=None if halt else 0.01)
        except subprocess.TimeoutExpired:
            pass
        # kill -9 of the whole tree (for a halted run: whatever is left of it)
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.communicate()

    def round(self, pipeline: Pipeline, mode: str) -> dict[str, int]:
        pipeline.produce()
        self.kill_run(pipeline, mode)
        summary = self.run_clean(pipeline)
        result = self.results[pipeline.kind]
        result["rounds"] += 1
        result["kills"][mode] += 1
        result["replayed_batches"] += len(summary.get("skipped_batches") or [])
        return summary

    def run(self, rounds: int, spark, plan: dict[str, list[str]] | None = None,
            parallel: bool = False) -> dict[str, dict[str, Any]]:
        """``rounds`` rounds per pipeline, each with a kill mode drawn at random; or, with ``plan``, the kill
        modes given per pipeline kind, in order (the test suite's short, deterministic version).
        ``parallel``: the pipelines' rounds run at the same time, one thread each (runs of different
        pipelines overlap, as they do in production; on 2 cores the whole takes about half the time)."""
        if plan is not None:
            rounds = max((len(m) for m in plan.values()), default=0)
        if parallel:
            import threading

            errors: list[BaseException] = []

            def worker(pipeline: Pipeline) -> None:
                try:
                    self._rounds_of(pipeline, rounds, spark, plan)
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
            if plan is None and "random" in self.modes:
                for pipeline in self.pipelines:
                    pipeline.produce()
                    self.run_clean(pipeline)  # a first, clean run: how long a run takes, for random kill times
            for n in range(rounds):
                for pipeline in self.pipelines:
                    self._round_of(pipeline, n, rounds, spark, plan)
        for pipeline in self.pipelines:
            result = self.results[pipeline.kind]
            result.update(pipeline.compare(spark))
            result["produced"] = pipeline.produced
        return self.results

    def _rounds_of(self, pipeline: Pipeline, rounds: int, spark, plan) -> None:
        if plan is None and "random" in self.modes:
            pipeline.produce()
            self.run_clean(pipeline)
        for n in range(rounds):
            self._round_of(pipeline, n, rounds, spark, plan)

    def _round_of(self, pipeline: Pipeline, n: int, rounds: int, spark, plan) -> None:
        if plan is not None:
            if n >= len(plan.get(pipeline.kind, [])):
                return
            mode = plan[pipeline.kind][n]
        else:
            mode = pipeline.rng.choice(self.modes)
        self.round(pipeline, mode)
        check = pipeline.compare(spark)
        log(f"{pipeline.kind} round {n + 1}/{rounds} ({mode}): {check}")
        if check["lost"] or check["duplicated"] or check["stale"] or check["unexpected"]:
            self.results[pipeline.kind]["failures"].append({"round": n + 1, "mode": mode, **check})


def table_of(results: dict[str, dict[str, Any]]) -> str:
    header = ["pipeline", "rounds", *MODES, "replays", "produced", "rows", "lost", "duplicated", "stale"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for kind, r in results.items():
        cells = [kind, r["rounds"], *(r["kills"][m] for m in MODES), r["replayed_batches"], r["produced"],
                 r["rows"], r["lost"], r["duplicated"], r["stale"] + r["unexpected"]]
        lines.append("| " + " | ".join(str(c) for c in cells) + " |")
    return "\n".join(lines)


def failed(results: dict[str, dict[str, Any]]) -> bool:
    return any(r["lost"] or r["duplicated"] or r["stale"] or r["unexpected"] or r["failures"] for r in results.values())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=50, help="rounds per pipeline (default 50)")
    parser.add_argument("--pipelines", default=",".join(PIPELINES), help="files,kafka,merge")
    parser.add_argument("--modes", default=",".join(MODES), help=",".join(MODES))
    parser.add_argument("--seed", type=int, default=20261123)
    parser.add_argument("--keep", action="store_true", help="keep the work folder (tables, checkpoints)")
    parser.add_argument("--parallel", action="store_true",
                        help="run the pipelines' rounds at the same time (one thread per pipeline)")
    args = parser.parse_args(argv)
    kinds = [k for k in args.pipelines.split(",") if k]
    modes = [m for m in args.modes.split(",") if m]
    bad = [k for k in kinds if k not in PIPELINES] + [m for m in modes if m not in MODES]
    if bad:
        parser.error(f"unknown pipeline or mode: {', '.join(bad)}; pipelines: {', '.join(PIPELINES)}; "
                     f"modes: {', '.join(MODES)}")
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from spark_jobs.session import local_session

    work = Path(tempfile.mkdtemp(prefix="sluice-chaos-", dir=HOME / "var"))
    spark = local_session(load_settings(), app_name="sluice-chaos-check")
    spark.sparkContext.setLogLevel("ERROR")
    harness = Harness(work, args.seed, kinds, modes)
    started = time.monotonic()
    try:
        results = harness.run(args.rounds, spark, parallel=args.parallel)
    finally:
        harness.close()
        spark.stop()
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    table = table_of(results)
    print(table)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "chaos.json").write_text(json.dumps(
        {"rounds": args.rounds, "seed": args.seed, "modes": modes, "parallel": args.parallel, "minutes": round((time.monotonic() - started) / 60, 1),
         "results": results}, indent=2), encoding="utf-8")
    (RESULTS / "chaos.md").write_text(table + "\n", encoding="utf-8")
    if failed(results):
        print("chaos: records were lost, duplicated or stale (see the table)", file=sys.stderr)
        return 1
    print(f"chaos: 0 lost, 0 duplicated over {args.rounds} rounds per pipeline")
    return 0


if __name__ == "__main__":
    sys.exit(main())
