"""The house's floors, read from the source with ``ast`` (nothing is imported), package by package:

    the CLI (sluice_cli)  |  the DAG files (dags)                       top: never import each other
      -> the Airflow plugin (plugins/sluice_airflow)
      -> the driver (spark_jobs)  |  the launcher (sluice.launch)       never import each other
      -> the ground floor (sluice: settings, spec, contract, storage, schema, operations; no Spark, no Airflow)

    the local services (devservices: stack, S3 server, Kafka broker, readiness, build cache) import the
    product; nothing in the product imports them (their `sluice` sub-commands come in as entry points)

A module imports only from its floor or below (lazy imports inside functions count too); no two modules import
each other, directly or round a loop, and neither do two packages (``spark_jobs.sources`` -> ``spark_jobs.sinks``
-> ``spark_jobs.sources`` would be a loop).
"""

from __future__ import annotations

import ast
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[1]
PACKAGES = {"sluice": PROJECT / "sluice", "spark_jobs": PROJECT / "spark_jobs",
            "sluice_airflow": PROJECT / "plugins" / "sluice_airflow", "dags": PROJECT / "dags",
            "sluice_cli": PROJECT / "sluice_cli", "devservices": PROJECT / "devservices"}
# (package prefix, floor, room): the first that matches a module names its floor
FLOORS = (("devservices", 9, "the local services"), ("sluice_cli", 3, "the CLI"), ("dags", 3, "the DAG files"),
          ("sluice_airflow", 2, "the Airflow plugin"), ("spark_jobs", 1, "the driver"),
          ("sluice.launch", 1, "the launcher"), ("sluice", 0, "the ground floor"))
SIDEWAYS = ({"the driver", "the launcher"}, {"the CLI", "the DAG files"})
THIRD_PARTY = ("pyspark", "delta", "airflow")


def floor(module: str) -> tuple[int, str]:
    for prefix, level, room in FLOORS:
        if module == prefix or module.startswith(prefix + "."):
            return level, room
    raise AssertionError(f"{module} is in no room of the house")


def modules() -> dict[str, Path]:
    found = {}
    for package, folder in PACKAGES.items():
        for path in sorted(folder.rglob("*.py")):
            parts = [package, *path.relative_to(folder).with_suffix("").parts]
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def imports(path: Path, known: set[str]) -> set[str]:
    """The project modules and the heavy third-party packages ``path`` imports, anywhere in it."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
        for name in names:
            if name in known:
                out.add(name)
            elif name.split(".")[0] in THIRD_PARTY:
                out.add(name.split(".")[0])
    return out


def graph() -> dict[str, set[str]]:
    found = modules()
    return {name: imports(path, set(found)) - {name} for name, path in found.items()}


def unit(module: str, found: dict[str, Path]) -> str:
    """The package a module lives in (``spark_jobs.sinks``), or the module itself when it sits at the top of
    its package (``sluice.settings``, ``spark_jobs.batch.transform``)."""
    parent = module.rpartition(".")[0]
    return parent if parent and parent not in PACKAGES and found[module].name != "__init__.py" else module


def cycles_of(edges: dict[str, set[str]]) -> list[str]:
    found, state = [], {}

    def visit(node: str, path: list[str]) -> None:
        state[node] = "open"
        for target in sorted(edges.get(node, ())):
            if target not in edges:
                continue
            if state.get(target) == "open":
                found.append(" -> ".join([*path[path.index(target):], target]))
            elif target not in state:
                visit(target, [*path, target])
        state[node] = "done"

    for node in sorted(edges):
        if node not in state:
            visit(node, [node])
    return found


def test_every_module_imports_only_from_its_floor_or_below():
    wrong = []
    for module, targets in graph().items():
        level, where = floor(module)
        for target in sorted(targets):
            if target in THIRD_PARTY:
                continue
            their_level, theirs = floor(target)
            if their_level > level or {where, theirs} in SIDEWAYS:
                wrong.append(f"{module} ({where}) imports {target} ({theirs})")
    assert wrong == []


def test_the_product_never_imports_the_local_services():
    wrong = [f"{module} imports {target}" for module, targets in graph().items() if floor(module)[0] < 9
             for target in targets if target.startswith("devservices")]
    assert wrong == []


def test_spark_and_airflow_stay_on_their_floors():
    wrong = []
    for module, targets in graph().items():
        _, where = floor(module)
        if where in ("the ground floor", "the launcher") and targets & {"pyspark", "delta", "airflow"}:
            wrong.append(f"{module} ({where}) imports {sorted(targets & {'pyspark', 'delta', 'airflow'})}")
        if where == "the driver" and "airflow" in targets:
            wrong.append(f"{module} (the driver) imports airflow")
        if where in ("the Airflow plugin", "the DAG files") and targets & {"pyspark", "delta"}:
            wrong.append(f"{module} ({where}) imports Spark: DAG parsing must stay fast")
    assert wrong == []


def test_no_import_cycles_between_modules():
    assert cycles_of(graph()) == []


def test_no_import_cycles_between_packages():
    found = modules()
    edges: dict[str, set[str]] = {}
    for module, targets in graph().items():
        edges.setdefault(unit(module, found), set()).update(
            unit(t, found) for t in targets if t in found and unit(t, found) != unit(module, found))
    assert cycles_of(edges) == []


def test_modules_stay_readable_in_one_sitting():
    # about a dozen modules a package, no module over 500 lines (docs/development.md, "The house")
    found = modules()
    long = [f"{m}: {n} lines" for m, path in found.items() if (n := len(path.read_text().splitlines())) > 500]
    crowded = [f"{package}: {n} modules" for package in {unit(m, found) for m in found}
               if (n := sum(unit(m, found) == package for m in found)) > 13]
    assert long == [] and crowded == []


def test_the_checks_see_the_house():
    # the walk finds the modules that matter in their rooms, and a known import is seen
    edges = graph()
    assert {"sluice.contract", "sluice.launch.launcher", "spark_jobs.driver.job", "spark_jobs.run.runner",
            "sluice_airflow.pipeline_operator", "sluice_cli.main", "devservices.stack"} <= set(edges)
    assert "sluice.contract" in edges["spark_jobs.driver.job"]
    assert "sluice.launch.launcher" in edges["sluice_airflow.pipeline_operator"]
    assert [floor(m)[1] for m in ("sluice.spec", "sluice.launch.submit", "spark_jobs.sinks.scd2",
                                  "sluice_airflow.hook", "sluice_cli.main", "dags.sluice_pipelines",
                                  "devservices.s3_server")] == [
        "the ground floor", "the launcher", "the driver", "the Airflow plugin", "the CLI", "the DAG files",
        "the local services"]
    # the package walk sees a loop when there is one
    assert cycles_of({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a -> b -> c -> a"]


def test_sluice_settings_are_read_from_the_environment_in_one_place():
    # every SLUICE_* setting comes from sluice/settings.py (built once per process, then passed); the only
    # other reads are the launcher-to-driver channels named by constants (the launcher token, Kafka secrets)
    import re

    read = re.compile(r"""(environ\.get|getenv|environ\[)\(?\s*f?["']SLUICE_""")
    found = [f"{path.relative_to(PROJECT)}:{n}" for path in modules().values() if path.name != "settings.py"
             for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1) if read.search(line)]
    found += [f"{path.relative_to(PROJECT)}:{n}" for path in (PROJECT / "dags").glob("*.py")
              for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1) if read.search(line)]
    assert found == []


def test_the_s3_server_builder_runs_on_the_standard_library_alone():
    """`make setup` starts the SeaweedFS build with the system Python before the virtualenv exists (Makefile,
    s3-server): devservices.s3_server and what it imports must need nothing from site-packages."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-S", "-c", "import devservices.s3_server"], cwd=PROJECT,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
