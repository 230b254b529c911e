"""`make demo`: sample data lands, the orders_bronze DAG runs through Airflow, more data lands, it runs
again and ingests exactly the new rows; then the Delta table is shown.

Every step is a command a user can type; the demo prints each before running it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

BIN = Path(sys.executable).parent
HOME = Path(__file__).resolve().parent.parent
PIPELINE = "orders_bronze"


def run(cmd: list[str], capture: bool = False) -> str:
    print(f"\n$ {' '.join(cmd)}", flush=True)
    done = subprocess.run(cmd, cwd=HOME, text=True, capture_output=capture)
    if done.returncode != 0:
        if capture:
            print(done.stdout[-5000:], done.stderr[-5000:], sep="\n")
        sys.exit(f"demo: `{' '.join(cmd)}` failed with exit code {done.returncode}")
    return done.stdout if capture else ""


def airflow_run(dag_id: str) -> dict:
    """Run the DAG once through `airflow dags test` and return its run summary (the task's XCom)."""
    out = run([str(BIN / "sluice"), "airflow", "dags", "test", dag_id], capture=True)
    marker = "run summary: "
    lines = [line for line in out.splitlines() if marker in line]
    if not lines:
        sys.exit(f"demo: no run summary in the output of `airflow dags test {dag_id}`:\n{out[-3000:]}")
    text = lines[-1].split(marker, 1)[1]
    summary = json.loads(text[: text.rindex("}") + 1])
    print(
        f"  run {summary['run_id']}: {summary['batches']} micro-batch(es), {summary['input_rows']} rows in, "
        f"{summary['output_rows']} rows written, Delta version {summary['delta_version_before']} -> "
        f"{summary['delta_version_after']}"
    )
    for batch in summary["micro_batches"]:
        for source in batch["sources"]:
            files = ", ".join(Path(f).name for f in source.get("files", []))
            print(f"    batch {batch['batch_id']}: {source['input_rows']} rows from {files}")
    return summary


def main() -> None:
    drop = json.loads(run([str(BIN / "python"), "include/generate_sample_data.py", "--drop", "next"], capture=True))
    print(f"  landed drop {drop['drop']}: {drop['rows']}")
    first = airflow_run(PIPELINE)

    drop = json.loads(run([str(BIN / "python"), "include/generate_sample_data.py", "--drop", "next"], capture=True))
    print(f"  landed drop {drop['drop']}: {drop['rows']}")
    second = airflow_run(PIPELINE)

    if second["input_rows"] != drop["rows"]["orders"]:
        sys.exit(f"demo: the second run ingested {second['input_rows']} rows, expected {drop['rows']['orders']}")
    run([str(BIN / "sluice"), "show", PIPELINE, "--limit", "5"])
    print(
        f"\nDone: the first run ingested {first['input_rows']} rows, the second exactly the "
        f"{second['input_rows']} new ones. Checkpoint: {second['checkpoint']}; table: {second['sink']}.\n"
        "Next: `make airflow-standalone` for the UI, or `.venv/bin/sluice run customers_csv`."
    )


if __name__ == "__main__":
    main()
