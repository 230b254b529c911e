"""`make bench`: sluice against plain Spark doing the same work, in the same run, as ratios.

Every case runs both sides as real spark-submit processes with the same jars and Spark settings, a few
times each (BENCH_REPEATS, default 3), on data it generates itself (seeded). Absolute times on a shared
2-core machine are noise; the ratio of medians is the figure. Writes under bench/results/:
bench.json (by case id: ratio, goal, met, raw timings), bench.md (the table) and bench.png (the chart).

Cases so far (the numbering follows the performance issue):
  P1  file -> Delta rows/s: `sluice run` (AvailableNow) / plain batch read.json -> write delta   goal >= 0.90
  P4  Kafka -> Delta rows/s: `sluice run` (AvailableNow) / plain batch read kafka -> write delta goal >= 0.85

BENCH_SCALE (default 1.0) scales the data: 1.0 = 2M JSON rows in 200 files, 500k Kafka records.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

HOME = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(HOME))

from sluice.kafka_broker import create_topic, start_broker, stop_broker  # noqa: E402
from sluice.settings import load_settings  # noqa: E402
from sluice.spec import parse_spec  # noqa: E402
from sluice.submit import build_submit_plan  # noqa: E402

BIN = Path(sys.executable).parent
RESULTS = HOME / "bench" / "results"
WORK = HOME / "var" / "bench"
SCALE = float(os.environ.get("BENCH_SCALE", "1.0"))
REPEATS = int(os.environ.get("BENCH_REPEATS", "3"))
ORDERS_SCHEMA = "id BIGINT, ts TIMESTAMP, customer STRING, amount DOUBLE"


def log(message: str) -> None:
    print(f"[bench] {message}", file=sys.stderr, flush=True)


def env_for(lake: Path) -> dict[str, str]:
    return {
        **os.environ,
        "SLUICE_LAKE_ROOT": str(lake / "lake"),
        "SLUICE_CHECKPOINT_ROOT": str(lake / "checkpoints"),
        "SLUICE_PIPELINES": str(lake / "pipelines"),
        "SPARK_LOCAL_IP": "127.0.0.1",
    }


def sluice_run(spec: dict, lake: Path) -> dict:
    """A fresh pipeline (new table, new checkpoint) run once through `sluice run`; its summary and wall time."""
    shutil.rmtree(lake, ignore_errors=True)
    (lake / "pipelines").mkdir(parents=True)
    (lake / "lake").mkdir()
    path = lake / "pipelines" / f"{spec['name']}.yaml"
    path.write_text(json.dumps(spec), encoding="utf-8")  # JSON is YAML
    started = time.perf_counter()
    done = subprocess.run([str(BIN / "sluice"), "run", str(path)], capture_output=True, text=True, env=env_for(lake))
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"sluice run failed:\n{done.stderr[-3000:]}")
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    return {"rows": summary["output_rows"], "seconds": summary["duration_s"], "wall": round(wall, 3)}


def plain_run(args: list[str], lake: Path) -> dict:
    """bench/plain_batch.py through spark-submit with the very jars and conf a sluice run gets."""
    shutil.rmtree(lake, ignore_errors=True)
    lake.mkdir(parents=True)
    settings = load_settings()
    spec = parse_spec({"name": "plain", "source": {"format": "text", "path": "x"}})
    plan = build_submit_plan("plain.yaml", spec, settings, run_id="bench", summary_file=lake / "unused.json")
    command = ["spark-submit", "--master", "local[*]"]
    for key, value in plan.conf.items():
        command += ["--conf", f"{key}={value}"]
    command += ["--jars", plan.jars, str(HOME / "bench" / "plain_batch.py"), *args]
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, env={**env_for(lake), **plan.env_vars,
                                                                        "PATH": f"{BIN}:{os.environ['PATH']}"})
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"plain spark-submit failed:\n{done.stderr[-3000:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    return {**result, "wall": round(wall, 3)}


def measure(case: str, sluice_side, plain_side) -> dict:
    """Alternate the two sides REPEATS times (so drift on the machine hits both) and compare medians."""
    sluice_runs, plain_runs = [], []
    for n in range(REPEATS):
        log(f"{case}: round {n + 1}/{REPEATS}")
        sluice_runs.append(sluice_side())
        plain_runs.append(plain_side())
    rows = {r["rows"] for r in sluice_runs + plain_runs}
    if len(rows) != 1:
        raise RuntimeError(f"{case}: the two sides wrote different row counts: {sorted(rows)}")
    sluice_rate = statistics.median(r["rows"] / r["seconds"] for r in sluice_runs)
    plain_rate = statistics.median(r["rows"] / r["seconds"] for r in plain_runs)
    return {
        "rows": rows.pop(),
        "sluice_rows_per_s": round(sluice_rate),
        "plain_rows_per_s": round(plain_rate),
        "ratio": round(sluice_rate / plain_rate, 3),
        "sluice": sluice_runs,
        "plain": plain_runs,
    }


# --- P1: files -------------------------------------------------------------------------------------

def json_files(folder: Path, files: int, rows_per_file: int) -> int:
    if (folder / "_done").is_file():
        return files * rows_per_file
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    rng = random.Random(42)
    for f in range(files):
        lines = []
        for i in range(rows_per_file):
            n = f * rows_per_file + i
            lines.append(json.dumps({"id": n, "ts": f"2026-11-{1 + n % 28:02d}T{n % 24:02d}:00:00Z",
                                     "customer": f"c{rng.randint(1, 5000)}", "amount": round(rng.random() * 500, 2)}))
        (folder / f"part-{f:04d}.json").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (folder / "_done").write_text("")
    return files * rows_per_file


def case_p1() -> dict:
    files, per_file = max(2, int(200 * SCALE)), 10_000
    source = WORK / "data" / f"p1-{files}x{per_file}"
    rows = json_files(source, files, per_file)
    log(f"P1: {rows} rows of JSON in {files} files")
    # Spark skips files starting with "_" (the _done marker) in both readers
    spec = {"name": "bench_p1", "source": {"format": "json", "path": str(source), "schema": ORDERS_SCHEMA}}
    return measure(
        "P1",
        lambda: sluice_run(spec, WORK / "p1-sluice"),
        lambda: plain_run(["json", str(source), str(WORK / "p1-plain" / "table"), ORDERS_SCHEMA],
                          WORK / "p1-plain"),
    )


# --- P4: Kafka -------------------------------------------------------------------------------------

def case_p4() -> dict:
    from confluent_kafka import Producer

    records = max(1000, int(500_000 * SCALE))
    broker = start_broker(WORK / "kafka", load_settings().jars_dir)
    try:
        topic = "bench_orders"
        create_topic(broker.bootstrap_servers, topic, partitions=3)
        producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 20,
                             "queue.buffering.max.messages": 1_000_000})
        rng = random.Random(7)
        for n in range(records):
            producer.produce(topic, key=str(n), value=json.dumps(
                {"id": n, "ts": "2026-11-01T10:00:00Z", "customer": f"c{rng.randint(1, 5000)}", "amount": n * 0.5}))
            if n % 50_000 == 0:
                producer.poll(0)
        producer.flush(120)
        log(f"P4: {records} records in a 3-partition topic")
        spec = {"name": "bench_p4", "source": {"format": "kafka", "bootstrap_servers": broker.bootstrap_servers,
                                               "topics": [topic], "value": {"format": "json", "schema": ORDERS_SCHEMA}}}
        return measure(
            "P4",
            lambda: sluice_run(spec, WORK / "p4-sluice"),
            lambda: plain_run(["kafka", broker.bootstrap_servers, topic, str(WORK / "p4-plain" / "table"),
                               ORDERS_SCHEMA], WORK / "p4-plain"),
        )
    finally:
        stop_broker(broker)
        shutil.rmtree(WORK / "kafka", ignore_errors=True)


CASES = {
    "P1": ("file -> Delta rows/s, sluice run / plain batch", 0.90, case_p1),
    "P4": ("Kafka -> Delta rows/s, sluice run / plain batch", 0.85, case_p4),
}


def write_results(measured: dict) -> None:
    """Merge the cases measured now into bench.json (a run of some cases keeps the others' last results)."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / "bench.json"
    results = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    results.update(measured)
    results = {case: results[case] for case in CASES if case in results}
    path.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    lines = [
        f"{os.cpu_count()} cores; medians of each case's rounds; measured at the time in the last column.",
        "",
        "| case | what | rows | sluice rows/s | plain rows/s | ratio | goal | met | measured |",
        "|---|---|---:|---:|---:|---:|---:|:---:|---|",
    ]
    for case, r in results.items():
        lines.append(f"| {case} | {r['what']} | {r['rows']:,} | {r['sluice_rows_per_s']:,} | "
                     f"{r['plain_rows_per_s']:,} | {r['ratio']:.2f} | ≥ {r['goal']:.2f} | {'yes' if r['met'] else 'NO'} | "
                     f"{r['measured']} |")
    (RESULTS / "bench.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    _chart(results)
    print("\n".join(lines))


def _chart(results: dict) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cases = list(results)
    fig, ax = plt.subplots(figsize=(6, 3.2), dpi=120)
    ratios = [results[c]["ratio"] for c in cases]
    colors = ["#3a8d5b" if results[c]["met"] else "#c0503a" for c in cases]
    ax.bar(cases, ratios, color=colors, width=0.5)
    for i, case in enumerate(cases):
        ax.hlines(results[case]["goal"], i - 0.3, i + 0.3, colors="black", linestyles="dashed")
        ax.text(i, ratios[i] + 0.02, f"{ratios[i]:.2f}", ha="center")
    ax.axhline(1.0, color="grey", linewidth=0.8)
    ax.set_ylabel("sluice / plain Spark (rows/s)")
    ax.set_title("sluice vs plain Spark, same machine, same run (dashed: goal)")
    ax.set_ylim(0, max(1.2, max(ratios) + 0.15))
    fig.tight_layout()
    fig.savefig(RESULTS / "bench.png")


def main() -> None:
    wanted = sys.argv[1:] or list(CASES)
    unknown = [c for c in wanted if c not in CASES]
    if unknown:
        raise SystemExit(f"unknown case(s) {', '.join(unknown)}; cases: {', '.join(CASES)}")
    WORK.mkdir(parents=True, exist_ok=True)
    results = {}
    for case in wanted:
        what, goal, run = CASES[case]
        result = run()
        results[case] = {"what": what, "goal": goal, "met": result["ratio"] >= goal,
                         "measured": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                         "scale": SCALE, "rounds": REPEATS, **result}
    write_results(results)


if __name__ == "__main__":
    main()
