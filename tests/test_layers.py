"""The house's floors, read from the source with ``ast`` (nothing is imported):

    ground (the contract, settings, spec, ledger, locks; no Spark, no Airflow)
      -> spark_jobs (the driver)  |  the launcher (build the spark-submit, launch it)
      -> the Airflow plugin (operator, hook, DAG factory) -> the DAG files
      -> the CLI (sluice/cli.py)

A module imports only from its own floor or below (lazy imports inside functions count too), the driver
and the launcher never import each other, and no two modules import each other, directly or round a loop.
"""

from __future__ import annotations

import ast
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[1]
PACKAGES = {"sluice": PROJECT / "sluice", "spark_jobs": PROJECT / "spark_jobs",
            "sluice_airflow": PROJECT / "plugins" / "sluice_airflow", "dags": PROJECT / "dags"}
LAUNCHER = {"sluice.launcher", "sluice.submit", "sluice.environment", "sluice.stack", "sluice.jvm_archive"}
THIRD_PARTY = ("pyspark", "delta", "airflow")


def floor(module: str) -> tuple[int, str]:
    if module == "sluice.cli":
        return 4, "the CLI"
    if module.startswith("dags"):
        return 3, "the DAG files"
    if module.startswith("sluice_airflow"):
        return 2, "the Airflow plugin"
    if module.startswith("spark_jobs"):
        return 1, "the driver"
    if module in LAUNCHER:
        return 1, "the launcher"
    return 0, "the ground floor"


def modules() -> dict[str, Path]:
    found = {}
    for package, folder in PACKAGES.items():
        for path in sorted(folder.glob("*.py")):
            found[package if path.stem == "__init__" else f"{package}.{path.stem}"] = path
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


def test_every_module_imports_only_from_its_floor_or_below():
    wrong = []
    for module, targets in graph().items():
        level, where = floor(module)
        for target in sorted(targets):
            if target in THIRD_PARTY:
                continue
            their_level, theirs = floor(target)
            sideways = {where, theirs} == {"the driver", "the launcher"}
            if their_level > level or sideways:
                wrong.append(f"{module} ({where}) imports {target} ({theirs})")
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


def test_no_import_cycles():
    edges = graph()
    cycles, state = [], {}

    def visit(node: str, path: list[str]) -> None:
        state[node] = "open"
        for target in sorted(edges.get(node, ())):
            if target not in edges:
                continue
            if state.get(target) == "open":
                cycles.append(" -> ".join([*path[path.index(target):], target]))
            elif target not in state:
                visit(target, [*path, target])
        state[node] = "done"

    for module in sorted(edges):
        if module not in state:
            visit(module, [module])
    assert cycles == []


def test_the_checks_see_the_house():
    # the walk finds the modules that matter, and a known upward import would be caught
    edges = graph()
    assert {"sluice.contract", "sluice.launcher", "spark_jobs.job", "spark_jobs.runner",
            "sluice_airflow.pipeline_operator", "sluice.cli"} <= set(edges)
    assert "sluice.contract" in edges["spark_jobs.job"] and "sluice.launcher" in edges["sluice_airflow.pipeline_operator"]
    assert floor("sluice.contract")[0] < floor("spark_jobs.job")[0] < floor("sluice_airflow.hook")[0] < floor("sluice.cli")[0]


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
