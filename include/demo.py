"""`make demo`: sample files land and click events go to Kafka; the orders_bronze (files) and clicks_kafka
(Kafka) DAGs run through Airflow; more data arrives; they run again and ingest exactly the new rows; the
chain orders_bronze -> orders_silver (deduplicated, with regions) -> orders_gold (revenue per region and
day) runs; then the tables are shown, and queried by their names from a plain PySpark session. The local Kafka broker is started for the demo (and stopped after it) unless it
was already running.

Every step is a command a user can type; the demo prints each before running it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from generate_sample_data import (  # include/, beside this file
    BAD_ORDERS_PER_DROP,
    REDELIVERED_PER_DROP,
)

from devservices.kafka_broker import Broker
from sluice.settings import load_settings

BIN = Path(sys.executable).parent
HOME = Path(__file__).resolve().parent.parent
PIPELINE = "orders_bronze"
KAFKA_PIPELINE = "clicks_kafka"
CHAIN = ("orders_silver", "orders_gold")  # scheduled on orders_bronze's / orders_silver's table (Assets)


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
            if "files" in source:
                read = "files " + ", ".join(Path(f).name for f in source["files"])
            else:
                read = f"offsets {source['start_offset']} -> {source['end_offset']}"
            print(f"    batch {batch['batch_id']}: {source['input_rows']} rows, {read}")
    if summary.get("quarantined_rows"):
        print(f"  {summary['quarantined_rows']} bad record(s) quarantined in {summary['quarantine']}; "
              f"{summary.get('rescued_rows', 0)} record(s) with unknown fields kept in _rescued")
    return summary


def land_drop(kafka: str) -> dict:
    drop = json.loads(run(
        [str(BIN / "python"), "include/generate_sample_data.py", "--drop", "next", "--kafka", kafka], capture=True
    ))
    print(f"  landed drop {drop['drop']}: {drop['rows']} (clicks produced to Kafka)")
    return drop


def check(pipeline: str, summary: dict, expected: int) -> None:
    if summary["input_rows"] != expected:
        sys.exit(f"demo: {pipeline} ingested {summary['input_rows']} rows, expected {expected}")


def main() -> None:
    settings = load_settings()
    broker = Broker.load(settings.kafka_home)
    started_kafka = not (broker and broker.running())
    if started_kafka:
        run([str(BIN / "sluice"), "kafka", "up"])
        broker = Broker.load(settings.kafka_home)
    try:
        drop = land_drop(broker.bootstrap_servers)
        first = airflow_run(PIPELINE)
        first_clicks = airflow_run(KAFKA_PIPELINE)

        drop = land_drop(broker.bootstrap_servers)
        second = airflow_run(PIPELINE)
        check(PIPELINE, second, drop["rows"]["orders"])
        if second["quarantined_rows"] != BAD_ORDERS_PER_DROP:
            sys.exit(f"demo: {PIPELINE} quarantined {second['quarantined_rows']} records, expected {BAD_ORDERS_PER_DROP}")
        second_clicks = airflow_run(KAFKA_PIPELINE)
        check(KAFKA_PIPELINE, second_clicks, drop["rows"]["clicks"])
        # what a scheduler does when orders_bronze's table was updated: the chain runs
        silver, gold = (airflow_run(dag_id) for dag_id in CHAIN)
    finally:
        if started_kafka:
            run([str(BIN / "sluice"), "kafka", "down"])
    run([str(BIN / "sluice"), "show", PIPELINE, "--limit", "5"])
    run([str(BIN / "sluice"), "show", CHAIN[-1], "--limit", "12"])
    run([str(BIN / "sluice"), "backlog"])  # what waits for each pipeline now: nothing, for the ones that ran
    # the tables by name, from a plain PySpark session on the catalog the runs registered them in
    run([sys.executable, str(HOME / "include" / "query_by_name.py"),
         "SELECT region, day, revenue FROM gold.revenue_by_region ORDER BY day, region LIMIT 8"])
    run([sys.executable, str(HOME / "include" / "query_by_name.py"), "SHOW TABLES IN bronze"])
    print(
        f"\nDone. Files: the first run ingested {first['input_rows']} rows, the second exactly the "
        f"{second['input_rows']} new ones. Kafka: {first_clicks['input_rows']} then exactly the "
        f"{second_clicks['input_rows']} new records. Each drop's {BAD_ORDERS_PER_DROP} bad orders went to the "
        f"quarantine table {second['quarantine']}, with their raw text, file and error.\n"
        f"Chain: orders_silver dropped the {REDELIVERED_PER_DROP} orders per drop delivered twice "
        f"({silver['output_rows']} orders), orders_gold wrote {gold['output_rows']} rows of revenue per region "
        "and day (a day is written once it is complete: when orders more than an hour past its end arrived).\n"
        f"Tables: {second['sink']}, {silver['sink']}, {gold['sink']}, {second_clicks['sink']}; "
        f"checkpoints: {settings.checkpoint_root}. By name: bronze.orders, silver.orders, gold.revenue_by_region "
        f"in the catalog {settings.metastore_uri} (read them from any Spark session with the settings of "
        "`sluice catalog conf`; `make catalog-down` stops the local catalog).\n"
        "Next: `make airflow-standalone` for the UI -- every pipeline at a glance on its sluice page, "
        "http://127.0.0.1:8080/plugin/sluice -- or `.venv/bin/sluice run customers_csv`."
    )


if __name__ == "__main__":
    main()
