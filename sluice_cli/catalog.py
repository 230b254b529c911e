"""``sluice catalog``: the catalog that table names are registered in (:mod:`sluice.operations.catalog`)."""

from __future__ import annotations

import argparse
import json
import os
import shlex

from sluice.operations.catalog import (
    local_running,
    reader_conf,
    serve,
    server_jars,
    start_local,
    stop_local,
)
from sluice.settings import Settings
from sluice.spark_conf import s3a_conf


def cmd_catalog(args: argparse.Namespace, settings: Settings) -> int:
    """``up``/``down``/``status`` of the local metastore; ``conf``: the Spark settings that read the tables by
    name (``--conf key=value`` lines and ``--jars``, for ``pyspark``/``spark-submit``; ``--json``: one object)."""
    server = local_running(settings)
    if args.action == "conf":
        jars = settings.spark_jars()
        conf = reader_conf(settings)
        if settings.on_object_store:  # the lake in a bucket: S3A's settings (no secret: the AWS variables are)
            conf.update(s3a_conf(os.environ, settings))
            jars += settings.object_store_jars()
        conf["spark.jars"] = ",".join(str(j) for j in jars)
        if args.json:
            print(json.dumps(conf, indent=1))
        else:
            for key, value in conf.items():
                print(f"--conf {shlex.quote(f'{key}={value}')}")
        return 0
    if settings.catalog_uri and args.action in ("up", "down"):
        raise RuntimeError(f"SLUICE_CATALOG_URI names the catalog ({settings.catalog_uri}): sluice does not run it. "
                           "Unset it to use the local one")
    if args.action == "serve":  # in the foreground: a container's command (docker-compose's metastore)
        serve(settings)
    if args.action == "up":
        if server is not None:
            print(f"catalog: already running at {server.uri} (pid {server.pid})")
            return 0
        server = start_local(settings.catalog_home, settings.catalog_port,
                             server_jars(settings.jars_dir, settings.catalog_db), database=settings.catalog_db)
        print(f"catalog: a Hive metastore at {server.uri} (pid {server.pid}, data in {settings.catalog_home}); "
              "read the tables by name with the settings of `sluice catalog conf`")
    elif args.action == "down":
        if server is not None:
            stop_local(server)
            print("catalog: stopped")
        else:
            print("catalog: not running")
    elif args.action == "status":
        if settings.catalog_uri:
            print(f"catalog: {settings.catalog_uri} (SLUICE_CATALOG_URI; not run by sluice)")
            return 0
        print(f"catalog: running at {server.uri} (pid {server.pid})" if server else "catalog: not running")
        return 0 if server else 1
    return 0


def add_parser(sub) -> None:
    p = sub.add_parser("catalog", help="the catalog of table names (a Hive metastore): up, down, status, conf, "
                                       "serve (in the foreground)")
    p.add_argument("action", choices=["up", "down", "status", "conf", "serve"])
    p.add_argument("--json", action="store_true", help="with conf: the settings as one JSON object")
    p.set_defaults(func=cmd_catalog)
