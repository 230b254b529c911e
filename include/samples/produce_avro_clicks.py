"""Produce sample Avro click events to Kafka in Confluent's wire format (schema id 1), plus one record that
is not, for include/samples/clicks_avro.yaml (docs/kafka.md, "Avro values").

    .venv/bin/python include/samples/produce_avro_clicks.py --count 5 [--bootstrap 127.0.0.1:9092]
"""

from __future__ import annotations

import io
import json
import struct
import time
from pathlib import Path

import fastavro
from sample_producer import deliver, sample_args

SCHEMA = Path(__file__).resolve().parent.parent / "schemas" / "clicks.avsc"


def main() -> None:
    args = sample_args(__doc__, topic="clicks_avro", count=5, schema_id=1)
    schema = fastavro.parse_schema(json.loads(SCHEMA.read_text(encoding="utf-8")))
    now = int(time.time() * 1000)

    def records():
        for i in range(args.count):
            body = io.BytesIO()
            fastavro.schemaless_writer(body, schema, {"user": f"u{i % 3}", "page": f"/p{i}", "ts": now + i,
                                                      "referrer": None if i % 2 else "https://example.org"})
            yield f"u{i % 3}", struct.pack(">bI", 0, args.schema_id) + body.getvalue()
        yield "bad", b'{"user": "not avro"}'  # a bad record: quarantined

    deliver(args, records())
    print(f"produced {args.count} Avro records and 1 bad record to {args.topic}")


if __name__ == "__main__":
    main()
