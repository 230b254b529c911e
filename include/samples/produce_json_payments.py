"""Produce sample JSON payment events to Kafka, plus one value that is not JSON, for
include/samples/payments_kafka.yaml (docs/schema-inference.md, "Kafka json values").

    .venv/bin/python include/samples/produce_json_payments.py --count 3 [--first-id 1] [--bootstrap 127.0.0.1:9092]
"""

from __future__ import annotations

import argparse
import json

from confluent_kafka import Producer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap", default="127.0.0.1:9092")
    parser.add_argument("--topic", default="payments")
    parser.add_argument("--count", type=int, default=3)
    parser.add_argument("--first-id", type=int, default=1)
    args = parser.parse_args()

    producer = Producer({"bootstrap.servers": args.bootstrap})
    for n in range(args.first_id, args.first_id + args.count):
        value = {"id": n, "amount": round(n * 9.99, 2), "paid_at": f"2026-11-{n % 28 + 1:02d} 10:00:00",
                 "method": "card" if n % 2 else "cash"}
        producer.produce(args.topic, key=str(n), value=json.dumps(value))
    producer.produce(args.topic, key="bad", value="{not json")  # a bad record: quarantined, not inferred from
    if producer.flush(30) != 0:
        raise SystemExit(f"could not deliver every record to {args.bootstrap}")
    print(f"produced {args.count} payment(s) and 1 bad value to {args.topic}")


if __name__ == "__main__":
    main()
