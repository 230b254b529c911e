"""Produce sample JSON payment events to Kafka, plus one value that is not JSON, for
include/samples/payments_kafka.yaml (docs/schema-inference.md, "Kafka json values").

    .venv/bin/python include/samples/produce_json_payments.py --count 3 [--first-id 1] [--bootstrap 127.0.0.1:9092]
"""

from __future__ import annotations

import json

from sample_producer import deliver, sample_args


def main() -> None:
    args = sample_args(__doc__, topic="payments", count=3, first_id=1)

    def records():
        for n in range(args.first_id, args.first_id + args.count):
            value = {"id": n, "amount": round(n * 9.99, 2), "paid_at": f"2026-11-{n % 28 + 1:02d} 10:00:00",
                     "method": "card" if n % 2 else "cash"}
            yield str(n), json.dumps(value)
        yield "bad", "{not json"  # a bad record: quarantined, not inferred from

    deliver(args, records())
    print(f"produced {args.count} payment(s) and 1 bad value to {args.topic}")


if __name__ == "__main__":
    main()
