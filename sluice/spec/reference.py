"""The spec reference, ``docs/spec.md``, rendered from the spec models themselves.

Every field's description is the docstring under it in :mod:`sluice.spec` (pydantic's
``use_attribute_docstrings``), its type and default come from the model, and the models are found by
walking the field annotations from :class:`~sluice.spec.PipelineSpec` down (nested models, lists and
mappings of them, the source kinds' union), so the page cannot drift from the code. ``make docs`` writes
it; ``python -m sluice.spec.reference --check`` exits 1 when the file differs (a test does the same).

Imports only the spec model, pydantic and the standard library: no Spark, no Airflow.
"""

from __future__ import annotations

import argparse
import re
import sys
import types
import typing
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from pydantic.fields import FieldInfo

from sluice.spec import PipelineSpec

ROOT_MODEL = PipelineSpec
SPEC_DOC = Path(__file__).resolve().parents[2] / "docs" / "spec.md"
COMMAND = "make docs"

_SCALARS = {str: "string", int: "integer", float: "number", bool: "boolean", type(None): "null"}

_INTRO = """\
# Spec reference

<!-- Generated from the models in sluice/spec/ by `make docs` (python -m sluice.spec.reference).
     Do not edit by hand: change a field's docstring and run `make docs`. -->

*Generated from the field docstrings of [`sluice/spec/`](../sluice/spec/) by `make docs`; a test
fails when this page and the models differ.*

A spec is one YAML file in `include/pipelines/` (or the folder named by env `SLUICE_PIPELINES`); its
Airflow DAG has `dag_id` = `name`. A first one, step by step: [README, Writing a spec](../README.md#writing-a-spec).
Relative source, sink and quarantine paths start at the lake root (`SLUICE_LAKE_ROOT`, default
`var/lake`), checkpoints at the checkpoint root (`SLUICE_CHECKPOINT_ROOT`, default `var/checkpoints`);
see [operations.md](operations.md) for every setting.

An invalid spec is one error naming the file, the field and what is allowed, before any JVM starts:
`include/pipelines/signups.yaml: sink.mode: 'upsert' is not allowed; use one of: append, complete, merge`.
`sluice validate [SPEC...]` checks specs (default: the whole pipelines folder). In Airflow, invalid specs
show up as an import error of `dags/sluice_spec_errors.py`; the other pipelines' DAGs load as usual.

The sample specs in `include/pipelines/` cover the Spark guide's classics: `orders_bronze` (JSON → bronze,
partitioned by day) → `orders_silver` → `orders_gold` (see [chains.md](chains.md)), `customers_csv`,
`word_count` (text, complete mode), `events_windowed` (10-minute windows sliding every 5 minutes,
10-minute watermark, append mode: each window is written once, with its final count, after the
watermark passes its end) and `clicks_kafka` (see [kafka.md](kafka.md)).

The models, from the top of a spec down (types: `a | b` is either; `null` is YAML's null):
"""


# --- walking the models ------------------------------------------------------------------------------


def _strip_annotated(annotation: Any) -> tuple[Any, list[Any]]:
    """``Annotated[T, ...]`` -> (T, its constraints); anything else -> (itself, [])."""
    metadata: list[Any] = []
    while typing.get_origin(annotation) is typing.Annotated:
        annotation, *extra = typing.get_args(annotation)
        for item in extra:
            metadata.extend(item.metadata if isinstance(item, FieldInfo) else [item])
    return annotation, metadata


def _is_model(annotation: Any) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, BaseModel)


def _is_union(annotation: Any) -> bool:
    return typing.get_origin(annotation) in (typing.Union, types.UnionType)


def _literal_values(model: type[BaseModel], field: str) -> list[Any]:
    info = model.model_fields.get(field)
    if info is None:
        return []
    annotation, _ = _strip_annotated(info.annotation)
    return list(typing.get_args(annotation)) if typing.get_origin(annotation) is typing.Literal else []


def _models_in(annotation: Any, path: str, discriminator: str | None) -> list[tuple[type[BaseModel], str, str]]:
    """The models an annotation holds, each with its path in a spec (``expectations[]``,
    ``transform.tables.<name>``) and that path as prose (``source`` with ``format``: ``kafka``)."""
    annotation, _ = _strip_annotated(annotation)
    if _is_model(annotation):
        where = f"`{path}`"
        if discriminator:
            values = ", ".join(f"`{v}`" for v in _literal_values(annotation, discriminator))
            where += f" with `{discriminator}`: {values}"
        return [(annotation, path, where)]
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if _is_union(annotation):
        return [found for arg in args for found in _models_in(arg, path, discriminator)]
    if origin in (list, set, tuple, frozenset):
        return [found for arg in args for found in _models_in(arg, f"{path}[]", discriminator)]
    if origin is dict and len(args) == 2:
        return _models_in(args[1], f"{path}.<name>", discriminator)
    return []


def _field_name(name: str, info: FieldInfo) -> str:
    """The name a spec writes: the alias when there is one (``schema`` for ``schema_``)."""
    return info.alias or name


def models(root: type[BaseModel] = ROOT_MODEL) -> dict[type[BaseModel], list[str]]:
    """Every model reachable from ``root``, depth first in field order, with where each sits in a spec."""
    found: dict[type[BaseModel], list[str]] = {}

    def visit(model: type[BaseModel], where: str, prefix: str) -> None:
        if model in found:
            if where not in found[model]:
                found[model].append(where)
            return
        found[model] = [where]
        for name, info in model.model_fields.items():
            path = f"{prefix}{_field_name(name, info)}"
            discriminator = info.discriminator if isinstance(info.discriminator, str) else None
            for child, child_path, child_where in _models_in(info.annotation, path, discriminator):
                visit(child, child_where, f"{child_path}.")

    visit(root, "the top level of a spec file", "")
    return found


# --- rendering ---------------------------------------------------------------------------------------


def _anchor(model: type[BaseModel]) -> str:
    return model.__name__.lower()


_CONSTRAINTS = (
    ("gt", "> {}"), ("ge", "≥ {}"), ("lt", "< {}"), ("le", "≤ {}"),
    ("min_length", "length ≥ {}"), ("max_length", "length ≤ {}"), ("pattern", "matching `{}`"),
)


def _constraints(items: list[Any]) -> list[str]:
    """pydantic's field constraints (``Field(gt=0)``, ``max_length``, ``pattern``) as prose."""
    found = []
    for item in items:
        for attr, template in _CONSTRAINTS:
            value = getattr(item, attr, None)
            if value is not None and not callable(value):
                found.append(template.format(value))
    return found


def _type(annotation: Any, metadata: list[Any] = ()) -> str:
    """A field's type as a reader of YAML sees it, with links to the models' sections."""
    annotation, inner = _strip_annotated(annotation)
    constraints = _constraints([*metadata, *inner])
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if _is_model(annotation):
        text = f"[{annotation.__name__}](#{_anchor(annotation)})"
    elif annotation in _SCALARS:
        text = _SCALARS[annotation]
    elif origin is typing.Literal:
        text = " \\| ".join(f"`{v}`" for v in args)
    elif _is_union(annotation):
        # None last: "integer > 0 | null"
        members = sorted(args, key=lambda a: a is type(None))
        text = " \\| ".join(_type(arg) for arg in members)
    elif origin in (list, set, tuple, frozenset):
        text = f"list of {_member(args[0])}" if args else "list"
    elif origin is dict:
        text = f"mapping of {_member(args[0])} to {_member(args[1])}" if args else "mapping"
    elif annotation is Any:
        text = "any"
    else:
        text = getattr(annotation, "__name__", str(annotation))
    if constraints:
        text = f"{text} ({', '.join(constraints)})"
    return text


def _member(annotation: Any) -> str:
    """The type of a list's items or a mapping's values: a union in brackets, so it reads as one type."""
    text = _type(annotation)
    return f"({text})" if _is_union(_strip_annotated(annotation)[0]) else text


def _yaml_value(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_yaml_value(v)}" for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_yaml_value(v) for v in value) + "]"
    return str(value)


def _default(info: FieldInfo) -> str:
    if info.default_factory is not None:
        value = info.default_factory()
        if isinstance(value, BaseModel):
            return f"the defaults of [{type(value).__name__}](#{_anchor(type(value))})"
        return f"`{_yaml_value(value)}`"
    if info.is_required():
        return "**required**"
    return f"`{_yaml_value(info.default)}`"


def _prose(text: str | None) -> str:
    """A docstring as one Markdown line: reST literals as code, ``docs/<page>.md`` as links (this page
    is in docs/), pipes escaped for the table."""
    if not text:
        return ""
    text = " ".join(line.strip() for line in text.strip().splitlines())
    text = re.sub(r":[a-z]+:`~?([^`]+)`", r"`\1`", text)
    text = text.replace("``", "`")
    text = re.sub(r"\bdocs/([\w-]+\.md)\b", r"[\1](\1)", text)
    return text.replace("|", "\\|")


def _section(model: type[BaseModel], where: list[str]) -> str:
    lines = [f"## {model.__name__}", ""]
    doc = model.__doc__ if model.__doc__ and model.__doc__ is not BaseModel.__doc__ else ""
    if doc:
        lines += [_prose(doc).replace("\\|", "|"), ""]
    lines += [f"In a spec: {'; '.join(where)}.", ""]
    lines += ["| field | type | default | description |", "|---|---|---|---|"]
    for name, info in model.model_fields.items():
        lines.append(
            f"| `{_field_name(name, info)}` | {_type(info.annotation, info.metadata)} | {_default(info)} "
            f"| {_prose(info.description)} |"
        )
    return "\n".join(lines) + "\n"


def render() -> str:
    """``docs/spec.md``: the introduction, a contents list, then one section per model."""
    found = models()
    contents = [f"* [{m.__name__}](#{_anchor(m)}): {where[0]}" for m, where in found.items()]
    parts = [_INTRO + "\n" + "\n".join(contents) + "\n"]
    parts += [_section(model, where) for model, where in found.items()]
    return "\n".join(parts)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sluice.spec.reference", description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the file differs from the models")
    parser.add_argument("--output", type=Path, default=SPEC_DOC, help=f"default: {SPEC_DOC}")
    args = parser.parse_args(argv)
    text = render()
    current = args.output.read_text(encoding="utf-8") if args.output.exists() else None
    if args.check:
        if current != text:
            print(f"{args.output} is not what the spec models render; run `{COMMAND}` and commit it",
                  file=sys.stderr)
            return 1
        print(f"{args.output} is up to date")
        return 0
    if current != text:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(text, encoding="utf-8")
        print(f"wrote {args.output}")
    else:
        print(f"{args.output} is up to date")
    return 0


if __name__ == "__main__":
    sys.exit(main())
