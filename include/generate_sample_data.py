"""Sample landing data for the demo pipelines, deterministic per drop.

    python include/generate_sample_data.py --drop 1      # first drop: files for every sample pipeline
    python include/generate_sample_data.py --drop 2      # a later drop: new files only
    python include/generate_sample_data.py --drop next   # the drop after the last one written
    python include/generate_sample_data.py --drop 1 --if-empty   # only when the lake has no landing data yet

With SLUICE_LAKE_ROOT in a bucket (``s3a://...``, the AWS variables naming the store) the drop is written to a
temporary folder and copied into the bucket.

A drop writes new files (named after the drop) and never touches earlier ones, so a pipeline run after
drop 2 must ingest exactly drop 2's rows. Running a drop twice rewrites the same files with the same
content. Ground truth (rows per drop) is printed as JSON.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
import random
import shutil
import tempfile
from datetime import datetime, timedelta, timezone
from pathlib import Path

from sluice.storage.files import Storage

ORDERS_PER_FILE = 50
ORDER_FILES_PER_DROP = 3
WORDS = ["spark", "delta", "stream", "airflow", "sluice", "kafka", "batch", "table"]
COUNTRIES = ["DE", "FR", "NL", "PL", "SE"]


def lake_location() -> str:
    default = Path(__file__).resolve().parent.parent / "var" / "lake"
    return os.environ.get("SLUICE_LAKE_ROOT") or str(default)


def lake_root() -> Path:
    """The lake as a local folder (a lake in a bucket: main() writes to a temporary one, then copies)."""
    return Path(lake_location())


def _write_atomically(path: Path, text: str) -> None:
    # A file stream source lists the folder: a half-written file must never be visible under its name.
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / f".{path.name}.tmp"
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)


def orders(root: Path, drop: int) -> int:
    """One day of orders per drop (drop 1: 2026-11-01), in that day's folder ``landing/orders/dt=<day>``
    (what orders_bronze's backfill section reads)."""
    rng = random.Random(drop)
    base = datetime(2026, 11, 1, tzinfo=timezone.utc) + timedelta(days=drop - 1)
    folder = root / "landing" / "orders" / f"dt={base.date().isoformat()}"
    rows = 0
    sent = []
    for f in range(ORDER_FILES_PER_DROP):
        lines = []
        for i in range(ORDERS_PER_FILE):
            order_id = (drop - 1) * ORDER_FILES_PER_DROP * ORDERS_PER_FILE + f * ORDERS_PER_FILE + i
            ts = base + timedelta(minutes=rng.randint(0, 24 * 60 - 1))
            lines.append(json.dumps({
                "id": order_id,
                "ts": ts.strftime("%Y-%m-%dT%H:%M:%SZ"),
                "customer": f"c{rng.randint(1, 20):03d}",
                "amount": round(rng.uniform(5, 500), 2),
            }))
        _write_atomically(folder / f"orders-{drop:03d}-{f}.json", "\n".join(lines) + "\n")
        rows += len(lines)
        sent += lines
    # At-least-once upstream: a few orders are delivered twice. Bronze keeps what landed; orders_silver
    # drops the copies (dedupe by id within its watermark).
    _write_atomically(folder / f"orders-{drop:03d}-redelivered.json", "\n".join(sent[:REDELIVERED_PER_DROP]) + "\n")
    rows += REDELIVERED_PER_DROP
    # Real landing zones are dirty: every drop brings BAD_ORDERS_PER_DROP records that cannot be rows (a line
    # cut short, a text where the amount goes), which sluice quarantines, and one with a field the schema
    # does not declare, which lands in the table with the field kept in _rescued.
    order_id = drop * 1_000_000
    dirty = [
        '{"id": %d, "ts": "2026-11-01T10:00:00Z", "custo' % order_id,
        json.dumps({"id": order_id + 1, "ts": base.strftime("%Y-%m-%dT%H:%M:%SZ"), "customer": "c001",
                    "amount": "twelve"}),
        json.dumps({"id": order_id + 2, "ts": base.strftime("%Y-%m-%dT%H:%M:%SZ"), "customer": "c002",
                    "amount": 12.0, "coupon": "WELCOME"}),
    ]
    _write_atomically(folder / f"orders-{drop:03d}-dirty.json", "\n".join(dirty) + "\n")
    return rows + len(dirty)


BAD_ORDERS_PER_DROP = 2
REDELIVERED_PER_DROP = 3


def customers(root: Path, drop: int) -> int:
    rng = random.Random(1000 + drop)
    lines = [["customer", "name", "country", "signed_up"]]
    for i in range(10):
        n = (drop - 1) * 10 + i + 1
        lines.append([f"c{n:03d}", f"Customer {n}", rng.choice(COUNTRIES), f"2026-10-{(n % 28) + 1:02d}"])
    text = io.StringIO(newline="")
    csv.writer(text).writerows(lines)
    _write_atomically(root / "landing" / "customers" / f"customers-{drop:03d}.csv", text.getvalue())
    return len(lines) - 1


def words(root: Path, drop: int) -> int:
    rng = random.Random(2000 + drop)
    lines = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 8))) for _ in range(20)]
    _write_atomically(root / "landing" / "words" / f"words-{drop:03d}.txt", "\n".join(lines) + "\n")
    return len(lines)


def events(root: Path, drop: int) -> int:
    """Events of one hour per drop (drop 1: 12:00-13:00, drop 2: 13:00-14:00, ...)."""
    rng = random.Random(3000 + drop)
    start = datetime(2026, 11, 1, 11, tzinfo=timezone.utc) + timedelta(hours=drop)
    lines = []
    for _ in range(40):
        ts = start + timedelta(seconds=rng.randint(0, 3599))
        lines.append(json.dumps({"ts": ts.strftime("%Y-%m-%dT%H:%M:%SZ"), "word": rng.choice(WORDS[:3])}))
    _write_atomically(root / "landing" / "events" / f"events-{drop:03d}.json", "\n".join(lines) + "\n")
    return len(lines)


def clicks(bootstrap: str, drop: int, count: int = 100) -> int:
    """Produce ``count`` click events for ``drop`` to the Kafka topic ``clicks`` (created if missing)."""
    from confluent_kafka import Producer

    from devservices.kafka_broker import create_topic

    create_topic(bootstrap, "clicks", partitions=3)
    rng = random.Random(4000 + drop)
    start = datetime(2026, 11, 1, 12, tzinfo=timezone.utc) + timedelta(hours=drop)
    producer = Producer({"bootstrap.servers": bootstrap})
    for _ in range(count):
        user = f"u{rng.randint(1, 25):02d}"
        ts = start + timedelta(seconds=rng.randint(0, 3599))
        value = {"user": user, "page": rng.choice(["/", "/cart", "/pay", "/help"]), "ts": ts.strftime("%Y-%m-%dT%H:%M:%SZ")}
        producer.produce("clicks", key=user, value=json.dumps(value))
    if producer.flush(30):
        raise RuntimeError(f"could not deliver every click to Kafka at {bootstrap}")
    return count


GENERATORS = {"orders": orders, "customers": customers, "words": words, "events": events}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--drop", required=True, help="drop number (1 and up), or 'next'")
    parser.add_argument("--only", choices=sorted(GENERATORS), action="append", help="just these datasets")
    parser.add_argument("--kafka", metavar="BOOTSTRAP", help="also produce the drop's click events to this broker")
    parser.add_argument("--if-empty", action="store_true", help="do nothing when the lake has landing data")
    args = parser.parse_args()
    location = lake_location()
    remote = "://" in location
    if args.if_empty and Storage(location).is_dir("landing"):
        print(json.dumps({"lake_root": location, "drop": None, "rows": {}, "skipped": "the lake has landing data"}))
        return
    root = Path(tempfile.mkdtemp(prefix="sluice-sample-")) if remote else lake_root()
    if remote and args.drop == "next":
        parser.error("--drop next needs a lake on local disk; name the drop for a lake in a bucket")
    if args.drop == "next":
        drop = next_drop(root)
    elif args.drop.isdigit() and int(args.drop) >= 1:
        drop = int(args.drop)
    else:
        parser.error(f"--drop takes a number from 1 up, or 'next'; got {args.drop!r}")
    counts = {name: gen(root, drop) for name, gen in GENERATORS.items() if not args.only or name in args.only}
    if args.kafka:
        counts["clicks"] = clicks(args.kafka, drop)
    if remote:  # into the bucket, then the temporary folder goes
        Storage(str(root)).copy_to(Storage(location))
        shutil.rmtree(root, ignore_errors=True)
    print(json.dumps({"lake_root": location, "drop": drop, "rows": counts}))


def next_drop(root: Path) -> int:
    """One more than the highest drop written to any landing folder."""
    drops = [int(p.name.split("-")[1].split(".")[0]) for p in (root / "landing").rglob("*-[0-9][0-9][0-9]*")
             if p.is_file()]
    return max(drops, default=0) + 1


if __name__ == "__main__":
    main()
