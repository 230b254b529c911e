"""File discovery alone, at a landing folder's full size: ``python -m bench.discovery_scale --files 1000000``.

What ``source.discovery`` costs a run once a pipeline has ingested ``--files`` files (issue 40), without the
cost of reading and writing them: each run is one ``availableNow`` query of the pipeline's file source into a
``foreachBatch`` that reads nothing, so what is left is the source's start (its index or log restored), its
listing and each batch's planning. Four runs, each a JVM of its own (its peak resident memory read from
``/proc``, ``VmHWM``):

1. the history: one run takes every file, ``--per-batch`` files a micro-batch;
2. ten new files land; a run takes them (``new``);
3. a run finds nothing (``idle``);
4. the same ten files into a fresh checkpoint, and a run after it that finds nothing (``fresh_new``,
   ``fresh_idle``): the ratios' denominators.

The files are made once (``var/bench/discovery/<files>/landing``, ``--per-folder`` a day folder, as a
landing folder of daily drops is) and kept for the next measurement; the checkpoints are made again each
time. ``--discovery spark`` measures Spark's own file source the same way; ``--listing incremental``
sluice's listing after a mark (``source.listing: incremental``, ``look_back: 0s``): the history's run lists
every name and writes the marks, the later runs list the names after them. The result:
``bench/results/discovery-<files>-<discovery>[-incremental].json`` and a table on stdout.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from bench import HOME, RESULTS

WORK = HOME / "var" / "bench" / "discovery"
SCHEMA = "id BIGINT"
NEW_FILES = 10


def make_files(landing: Path, files: int, per_folder: int) -> None:
    done = landing.parent / f"_done-{per_folder}"
    if done.is_file():
        return
    shutil.rmtree(landing.parent, ignore_errors=True)
    started = time.perf_counter()
    for n in range(files):
        folder = landing / f"dt={n // per_folder:05d}"
        if n % per_folder == 0:
            folder.mkdir(parents=True)
        (folder / f"part-{n:07d}.json").write_text(f'{{"id": {n}}}\n', encoding="utf-8")
    done.write_text("", encoding="utf-8")
    print(f"[discovery] {files:,} files made in {time.perf_counter() - started:.0f} s", file=sys.stderr, flush=True)


INCREMENTAL = "incremental,0,86400000"
"""``sluice.listing`` of ``--listing incremental``: look_back 0s, full_listing_every 1d."""


def child(landing: str, checkpoint: str, discovery: str, per_batch: int, listing: str) -> None:
    """One query run in this process's own JVM; prints what it measured as one JSON line."""
    from sluice.settings import load_settings
    from sluice.storage.checkpoint import source_folder
    from spark_jobs.driver.session import local_session
    from spark_jobs.sources.files import INDEXED_SOURCE, KEEP_EVERY_FILE

    before = _last_batch(checkpoint)
    session_started = time.perf_counter()
    spark = local_session(load_settings(), app_name="discovery-scale")
    spark.sparkContext.setLogLevel("ERROR")
    session_s = time.perf_counter() - session_started
    reader = spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", per_batch)
    if discovery == "index":
        reader = reader.format(INDEXED_SOURCE).option("sluice.format", "json").option(
            "sluice.listing", INCREMENTAL if listing == "incremental" else "full")
    else:
        reader = reader.format("json").option("maxFileAge", KEEP_EVERY_FILE)
    started = time.perf_counter()
    stream = reader.load(landing)
    query = (stream.writeStream.foreachBatch(lambda batch, batch_id: None)  # reads nothing: discovery alone
             .option("checkpointLocation", checkpoint).trigger(availableNow=True).start())
    query.awaitTermination()
    query_s = time.perf_counter() - started
    report = None
    if discovery == "index":
        report = json.loads(spark._jvm.dev.sluice.files.IndexedFileSource.report(source_folder(checkpoint)))
    pid = spark._jvm.java.lang.ProcessHandle.current().pid()
    status = Path(f"/proc/{pid}/status").read_text(encoding="utf-8")
    peak_kb = next(int(line.split()[1]) for line in status.splitlines() if line.startswith("VmHWM:"))
    after = _last_batch(checkpoint)
    spark.stop()
    print(json.dumps({"query_s": round(query_s, 3), "session_s": round(session_s, 3),
                      "batches": after - before, "jvm_peak_mb": round(peak_kb / 1024, 1), "discovery": report}))


def _last_batch(checkpoint: str) -> int:
    """The checkpoint's last committed batch, -1 before the first."""
    from sluice.storage.checkpoint import Checkpoint

    return (Checkpoint(checkpoint).done() or [-1])[-1]


def run(landing: Path, checkpoint: Path, discovery: str, per_batch: int, listing: str) -> dict:
    started = time.perf_counter()
    out = subprocess.run([sys.executable, "-m", "bench.discovery_scale", "--child", str(landing), str(checkpoint),
                          "--discovery", discovery, "--per-batch", str(per_batch), "--listing", listing],
                         cwd=HOME, capture_output=True, text=True, check=False,
                         env={**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"})
    if out.returncode != 0:
        raise RuntimeError(f"the run failed:\n{out.stderr[-4000:]}")
    result = json.loads(out.stdout.strip().splitlines()[-1])
    result["wall_s"] = round(time.perf_counter() - started, 3)
    return result


def python_checks(landing: Path, checkpoint: Path) -> dict:
    """What a ``sluice run`` does besides the query, on the driver's Python side, before it starts: the
    backlog (``backlog_before``) and the rewritten-file check (``on_overwrite``), timed here on the history's
    checkpoint (each in a process of its own, its peak memory read as the query runs' is)."""
    code = ("import json, resource, sys, time\n"
            "from sluice.storage.checkpoint import Checkpoint\n"
            "from sluice.operations.backlog import files_backlog\n"
            "from spark_jobs.sources.overwrites import find_rewritten\n"
            "landing, checkpoint, which = sys.argv[1:]\n"
            "started = time.perf_counter()\n"
            "if which == 'backlog':\n"
            "    found = files_backlog(landing, Checkpoint(checkpoint))['files']\n"
            "else:\n"
            "    found = len(find_rewritten(landing, checkpoint) or [])\n"
            "print(json.dumps({'seconds': round(time.perf_counter() - started, 3), 'found': found,\n"
            "                  'peak_mb': round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)}))\n")
    checks = {}
    for which in ("backlog", "rewritten"):
        out = subprocess.run([sys.executable, "-c", code, str(landing), str(checkpoint), which], cwd=HOME,
                             capture_output=True, text=True, check=True)
        checks[which] = json.loads(out.stdout.strip().splitlines()[-1])
    return checks


def land_new(landing: Path, tag: str) -> None:
    folder = landing / "dt=99999"
    folder.mkdir(parents=True, exist_ok=True)
    for n in range(NEW_FILES):
        (folder / f"{tag}-{n}.json").write_text(f'{{"id": {-1 - n}}}\n', encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=1_000_000, help="files of history (default 1,000,000)")
    parser.add_argument("--per-folder", type=int, default=1000, help="files a day folder (default 1,000)")
    parser.add_argument("--per-batch", type=int, default=100_000,
                        help="files a micro-batch of the history run (default 100,000)")
    parser.add_argument("--discovery", choices=("index", "spark"), default="index")
    parser.add_argument("--listing", choices=("full", "incremental"), default="full")
    parser.add_argument("--child", nargs=2, metavar=("LANDING", "CHECKPOINT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(*args.child, args.discovery, args.per_batch, args.listing)
        return
    base = WORK / str(args.files)
    landing = base / "landing"
    make_files(landing, args.files, args.per_folder)
    shutil.rmtree(landing / "dt=99999", ignore_errors=True)
    fresh_landing = WORK / "fresh" / "landing"
    shutil.rmtree(fresh_landing.parent, ignore_errors=True)
    if args.listing == "incremental" and args.discovery != "index":
        parser.error("--listing incremental is sluice's discovery: --discovery index")
    tag = f"{args.discovery}{'-incremental' if args.listing == 'incremental' else ''}"
    checkpoints = base / f"checkpoints-{tag}"
    shutil.rmtree(checkpoints, ignore_errors=True)

    def step(name: str, *a) -> dict:
        result = run(*a)
        print(f"[discovery] {name}: {json.dumps(result)}", file=sys.stderr, flush=True)
        return result

    history = step("history", landing, checkpoints / "history", args.discovery, args.per_batch, args.listing)
    land_new(landing, "new")
    new = step("new", landing, checkpoints / "history", args.discovery, NEW_FILES, args.listing)
    idle = step("idle", landing, checkpoints / "history", args.discovery, NEW_FILES, args.listing)
    checks = python_checks(landing, checkpoints / "history")
    print(f"[discovery] the run's Python checks: {json.dumps(checks)}", file=sys.stderr, flush=True)
    land_new(fresh_landing, "new")
    fresh_new = step("fresh_new", fresh_landing, checkpoints / "fresh", args.discovery, NEW_FILES, args.listing)
    fresh_idle = step("fresh_idle", fresh_landing, checkpoints / "fresh", args.discovery, NEW_FILES, args.listing)
    shutil.rmtree(landing / "dt=99999", ignore_errors=True)  # the history folder stays as made, for the next time
    result = {
        "files": args.files, "per_folder": args.per_folder, "per_batch": args.per_batch, "discovery": args.discovery,
        "listing": args.listing,
        "measured": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "cores": os.cpu_count(),
        "command": f"python -m bench.discovery_scale --files {args.files} --per-folder {args.per_folder} "
                   f"--per-batch {args.per_batch} --discovery {args.discovery} --listing {args.listing}",
        "new_ratio": round(new["query_s"] / fresh_new["query_s"], 3),
        "idle_ratio": round(idle["query_s"] / fresh_idle["query_s"], 3),
        "jvm_peak_mb_over_fresh": round(max(new["jvm_peak_mb"], idle["jvm_peak_mb"])
                                        - max(fresh_new["jvm_peak_mb"], fresh_idle["jvm_peak_mb"]), 1),
        "python_checks": checks,
        "runs": {"history": history, "new": new, "idle": idle, "fresh_new": fresh_new, "fresh_idle": fresh_idle},
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"discovery-{args.files}-{tag}.json").write_text(json.dumps(result, indent=2) + "\n",
                                                                           encoding="utf-8")
    print("| run | query s | batches | JVM peak MB | listing ms | index read ms |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, r in result["runs"].items():
        d = r["discovery"] or {}
        print(f"| {name} | {r['query_s']} | {r['batches']} | {r['jvm_peak_mb']} | {d.get('listing_ms', '-')} "
              f"| {d.get('restore_ms', '-')} |")
    print(f"new ratio {result['new_ratio']}, idle ratio {result['idle_ratio']}, "
          f"JVM peak over fresh {result['jvm_peak_mb_over_fresh']} MB")


if __name__ == "__main__":
    main()
