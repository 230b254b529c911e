"""The ``sluice`` sub-commands of the local services: ``sluice kafka``, ``sluice s3``, ``sluice stack``.

Each is registered through the ``sluice.commands`` entry points (pyproject.toml): a function that adds its
sub-parser to the ``sluice`` command line, so the CLI lists and runs them without importing this package."""

from __future__ import annotations

import argparse
import shlex
import sys

from sluice.settings import Settings


def cmd_kafka(args: argparse.Namespace, settings: Settings) -> int:
    """The project's local Kafka broker (KRaft, 127.0.0.1:SLUICE_KAFKA_PORT), data in var/kafka."""
    from devservices.kafka_broker import Broker, create_topic, start_broker, stop_broker

    broker = Broker.load(settings.kafka_home)
    if args.action == "up":
        if broker and broker.running():
            print(f"kafka: already running at {broker.bootstrap_servers} (pid {broker.pid})")
            return 0
        broker = start_broker(settings.kafka_home, settings.jars_dir, port=settings.kafka_port)
        print(f"kafka: running at {broker.bootstrap_servers} (pid {broker.pid}, data in {settings.kafka_home})")
    elif args.action == "down":
        if broker and broker.running():
            stop_broker(broker)
            print("kafka: stopped")
        else:
            print("kafka: not running")
    elif args.action == "status":
        running = bool(broker and broker.running())
        print(f"kafka: running at {broker.bootstrap_servers} (pid {broker.pid})" if running else "kafka: not running")
        return 0 if running else 1
    elif args.action == "create-topic":
        if not (broker and broker.running()):
            raise RuntimeError("the local Kafka broker is not running: start it with `make kafka-up`")
        created = create_topic(broker.bootstrap_servers, args.topic, args.partitions)
        print(f"kafka: topic {args.topic} {'created' if created else 'exists'} ({args.partitions} partitions)")
    return 0


def cmd_s3(args: argparse.Namespace, settings: Settings) -> int:
    """The project's local S3-compatible object store (SeaweedFS, 127.0.0.1:SLUICE_S3_PORT), data in var/s3."""
    from devservices.s3_server import S3Server, create_bucket, start_server, stop_server
    from sluice.storage.object_store import ObjectStore

    server = S3Server.load(settings.s3_home)
    running = bool(server and server.running())
    if args.action == "up":
        if running:
            print(f"s3: already running at {server.endpoint} (pid {server.pid})")
            return 0
        server = start_server(settings.s3_home, settings.var_dir, port=settings.s3_port)
        print(f"s3: running at {server.endpoint} (pid {server.pid}, data in {settings.s3_home}); "
              "its credentials: eval \"$(sluice s3 env)\"")
    elif args.action == "down":
        if running:
            stop_server(server)
            print("s3: stopped")
        else:
            print("s3: not running")
    elif args.action == "status":
        print(f"s3: running at {server.endpoint} (pid {server.pid})" if running else "s3: not running")
        return 0 if running else 1
    elif args.action == "env":
        if not running:
            raise RuntimeError("the local S3 server is not running: start it with `make s3-up`")
        for key, value in server.env().items():
            print(f"export {key}={shlex.quote(value)}")
    elif args.action == "create-bucket":
        if not args.bucket:
            raise RuntimeError("sluice s3 create-bucket BUCKET: name the bucket")
        if running:
            created = create_bucket(server, args.bucket)
        elif ObjectStore.from_env().configured:  # another store, as the AWS variables name it (docker-compose)
            created = ObjectStore.from_env().create_bucket(args.bucket)
        else:
            raise RuntimeError("the local S3 server is not running: start it with `make s3-up` (or set "
                               "AWS_ENDPOINT_URL and the credentials to create the bucket in another store)")
        print(f"s3: bucket {args.bucket} {'created' if created else 'exists'}")
    return 0


def cmd_stack(args: argparse.Namespace, settings: Settings) -> int:
    """The docker-compose topology as local processes (PostgreSQL, Airflow, Spark standalone, Kafka, S3, the
    catalog's metastore)."""
    from devservices.stack import Stack, StackError

    stack = Stack(settings)
    if args.action == "up":
        try:
            stack.up()
        except StackError as err:
            print(f"sluice stack: {err}", file=sys.stderr)
            return 1
        env = stack.env
        print(f"stack: up. Airflow http://127.0.0.1:{env['AIRFLOW__API__PORT']} (admin / admin), Spark master "
              f"{env['SLUICE_SPARK_MASTER']} (UI http://127.0.0.1:{stack.ports.spark_master_ui}), Kafka "
              f"127.0.0.1:{settings.kafka_port}, PostgreSQL 127.0.0.1:{stack.ports.postgres}, object store "
              f"{env['AWS_ENDPOINT_URL']} (lake {env['SLUICE_LAKE_ROOT']}), catalog {env['SLUICE_CATALOG_URI']}; "
              f"logs in {stack.logs}")
        print("stack: talk to it with  eval \"$(.venv/bin/sluice stack env)\"; stop it with  make stack-down")
    elif args.action == "down":
        stopped = stack.down()
        print(f"stack: stopped {', '.join(stopped) if stopped else 'nothing (not running)'}")
    elif args.action == "status":
        status = stack.status()
        for name, up in status.items():
            print(f"{name:24} {'running' if up else 'stopped'}")
        return 0 if all(status.values()) else 1
    elif args.action == "env":
        for key in sorted(k for k in stack.env if k.startswith(("AIRFLOW", "SLUICE", "SPARK", "PYSPARK", "AWS_"))):
            print(f"export {key}={shlex.quote(stack.env[key])}")
    return 0


def kafka(sub) -> None:
    p = sub.add_parser("kafka", help="the project's local Kafka broker: up, down, status, create-topic")
    p.add_argument("action", choices=["up", "down", "status", "create-topic"])
    p.add_argument("topic", nargs="?", help="with create-topic: the topic's name")
    p.add_argument("--partitions", type=int, default=3, help="with create-topic (default 3)")
    p.set_defaults(func=cmd_kafka)


def s3(sub) -> None:
    p = sub.add_parser("s3", help="the project's local S3 server (SeaweedFS): up, down, status, env, create-bucket")
    p.add_argument("action", choices=["up", "down", "status", "env", "create-bucket"])
    p.add_argument("bucket", nargs="?", help="with create-bucket: the bucket's name")
    p.set_defaults(func=cmd_s3)


def stack(sub) -> None:
    p = sub.add_parser("stack", help="the team topology as local processes: up, down, status, env")
    p.add_argument("action", choices=["up", "down", "status", "env"])
    p.set_defaults(func=cmd_stack)
