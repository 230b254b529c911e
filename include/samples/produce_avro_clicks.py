"""Produce sample Avro click events to Kafka in Confluent's wire format (schema id 1), plus one record that
is not, for include/samples/clicks_avro.yaml (docs/kafka.md, "Avro values").

    .venv/bin/python include/samples/produce_avro_clicks.py --count 5 [--bootstrap 127.0.0.1:9092]
"""

from __future__ import annotations

import argparse
import io
import json
import struct
import time
from pathlib import Path

import fastavro
from confluent_kafka import Producer

SCHEMA = Path(__file__).resolve().parent.parent / "schemas" / "clicks.avsc"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap", default="127.0.0.1:9092")
    parser.add_argument("--topic", default="clicks_avro")
    parser.add_argument("--count", type=int, default=5)
    parser.add_argument("--schema-id", type=int, default=1)
    args = parser.parse_args()

    schema = fastavro.parse_schema(json.loads(SCHEMA.read_text(encoding="utf-8")))
    producer = Producer({"bootstrap.servers": args.bootstrap})
    now = int(time.time() * 1000)
    for i in range(args.count):
        body = io.BytesIO()
        fastavro.schemaless_writer(body, schema, {"user": f"u{i % 3}", "page": f"/p{i}", "ts": now + i,
                                                  "referrer": None if i % 2 else "https://example.org"})
        producer.produce(args.topic, key=f"u{i % 3}", value=struct.pack(">bI", 0, args.schema_id) + body.getvalue())
    producer.produce(args.topic, key="bad", value=b'{"user": "not avro"}')  # a bad record: quarantined
    if producer.flush(30) != 0:
        raise SystemExit(f"could not deliver every record to {args.bootstrap} within 30 s")
    print(f"produced {args.count} Avro records and 1 bad record to {args.topic}")


if __name__ == "__main__":
    main()
