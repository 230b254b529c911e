"""What the sample producers share: their flags, and the delivery of the records they make (every one, or
exit 1 naming the broker)."""

from __future__ import annotations

import argparse
from collections.abc import Iterable

from confluent_kafka import Producer


def sample_args(doc: str, topic: str, count: int, **extra: int) -> argparse.Namespace:
    """``--bootstrap``, ``--topic`` and ``--count``, plus a whole-number flag per ``extra`` (``first_id=1``
    is ``--first-id``, default 1)."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--bootstrap", default="127.0.0.1:9092")
    parser.add_argument("--topic", default=topic)
    parser.add_argument("--count", type=int, default=count)
    for name, default in extra.items():
        parser.add_argument("--" + name.replace("_", "-"), type=int, default=default)
    return parser.parse_args()


def deliver(args: argparse.Namespace, records: Iterable[tuple[str, str | bytes]]) -> None:
    """Produce each ``(key, value)`` to the topic and wait until the broker has them all."""
    producer = Producer({"bootstrap.servers": args.bootstrap})
    for key, value in records:
        producer.produce(args.topic, key=key, value=value)
    if producer.flush(30) != 0:
        raise SystemExit(f"could not deliver every record to {args.bootstrap} within 30 s")
