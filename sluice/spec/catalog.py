"""The pipelines folder: every spec in it, loaded and checked together, looked up by name.

    catalog = PipelineCatalog.load(settings.pipelines_dir)
    catalog.specs           # {path: spec} of the valid specs
    catalog.errors          # one SpecError per invalid file (a bad spec, a name used twice, an unknown upstream)
    catalog.get("orders")   # the spec named orders (None if there is none)
    catalog.resolve("orders")   # a spec file path, or a pipeline name, as the CLI takes them
    catalog.with_upstream(spec) # a Delta source naming a pipeline, given that pipeline's table path

The models (``sluice.spec``) do no file I/O: what a spec needs from its neighbours, the folder gives it
here, once.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from sluice.settings import Settings
from sluice.spec import DeltaSource, PipelineSpec, SpecError, display_path, load_spec
from sluice.spec.common import table_name


def spec_files(folder: Path) -> list[Path]:
    return sorted(p for p in Path(folder).glob("*.y*ml") if p.suffix in (".yaml", ".yml"))


@dataclass
class PipelineCatalog:
    folder: Path
    specs: dict[Path, PipelineSpec] = field(default_factory=dict)
    errors: list[SpecError] = field(default_factory=list)
    readable: dict[Path, PipelineSpec] = field(default_factory=dict)
    """Every file that is a valid spec on its own, including those the folder refuses (a name claimed twice,
    an unknown upstream): what :func:`sinks_of` counts, since any of them may still be run by path."""

    @classmethod
    def load(cls, folder: Path) -> PipelineCatalog:
        """Every spec in ``folder``: the valid ones by file, and one error per invalid file.

        Two files with the same pipeline ``name`` are both errors (they would share a DAG and a checkpoint);
        so is a spec naming an upstream pipeline that is not a valid one here.
        """
        catalog = cls(Path(folder))
        specs, errors = catalog.specs, catalog.errors
        for path in spec_files(folder):
            try:
                specs[path] = load_spec(path)
            except SpecError as err:
                errors.append(err)
        catalog.readable = dict(specs)
        by_name: dict[str, list[Path]] = {}
        for path, spec in specs.items():
            for name in spec.names:
                by_name.setdefault(name, []).append(path)
        refused: dict[Path, str] = {}
        for name, paths in by_name.items():
            if len(paths) > 1:
                for path in paths:
                    if path not in refused:
                        refused[path] = _claimed_twice(name, path, paths, specs)
        for path, problem in refused.items():
            errors.append(SpecError(display_path(path), [problem]))
            del specs[path]
        by_table: dict[str, list[Path]] = {}
        for path, spec in specs.items():
            if spec.sink.table:
                by_table.setdefault(spec.sink.table, []).append(path)
        for name, paths in by_table.items():
            for path in paths[1:] if len(paths) > 1 else []:
                errors.append(SpecError(display_path(path), [
                    f"sink.table: {name!r} is also the table of {display_path(paths[0])}; a name is one table: "
                    "give this pipeline's table another name"]))
                del specs[path]
        names = {name for spec in specs.values() for name in spec.names}
        for path, spec in list(specs.items()):
            unknown = [n for n in spec.upstream_pipelines() if n not in names or n in spec.names]
            if unknown:
                field_ = ("source.pipeline" if isinstance(spec.source, DeltaSource) and spec.source.pipeline in unknown
                          else "schedule.asset")
                what = "itself" if unknown[0] in spec.names else f"{unknown[0]!r}, which is not a valid pipeline in {folder}"
                errors.append(SpecError(display_path(path), [f"{field_}: names {what}; name an upstream pipeline "
                                                              f"({', '.join(sorted(names - {spec.name})) or 'none here'})"]))
                del specs[path]
        return catalog

    def get(self, name: str) -> PipelineSpec | None:
        """The valid spec named ``name``, or that had that name before (``previous_names``)."""
        return next((spec for spec in self.specs.values() if spec.name == name), None) or next(
            (spec for spec in self.specs.values() if name in spec.previous_names), None)

    def _first_named(self, name: str) -> tuple[Path, PipelineSpec] | None:
        """The first spec file of the folder that is valid on its own and names ``name``: found even when the
        folder's checks refuse it (a duplicate name, an unknown upstream), so that its run says what is wrong.
        A loaded catalog answers from the specs it read; an empty one reads the files (one lookup by name)."""
        if self.readable:
            found = ((path, spec) for path, spec in self.readable.items())
        else:
            found = ((path, spec) for path in spec_files(self.folder) if (spec := _valid_or_none(path)) is not None)
        return next(((path, spec) for path, spec in found if spec.name == name), None)

    def resolve(self, arg: str, settings: Settings | None = None) -> Path:
        """A spec file path, the name of a pipeline in the folder (``sluice run orders``), or the catalog name of
        a pipeline's table (``sluice show bronze.orders``; with ``settings``, the names ``SLUICE_TABLE_NAMES=auto``
        gives count too)."""
        path = Path(arg)
        if path.is_file() or path.suffix in (".yaml", ".yml"):
            return path
        found = self._first_named(arg)
        if found is not None:
            return found[0]
        if "." in arg:
            by_table = self._first_with_table(arg, settings)
            if by_table is not None:
                return by_table
        specs = self.specs if self.readable else PipelineCatalog.load(self.folder).specs
        renamed = next((spec.name for spec in specs.values() if arg in spec.previous_names), None)
        if renamed:
            raise SpecError(arg, [f"the pipeline {arg} is now named {renamed} (its spec lists {arg} in "
                                  f"previous_names): use {renamed}"])
        raise SpecError(arg, [f"no such spec file, and no pipeline of that name in {self.folder}"])

    def _first_with_table(self, arg: str, settings: Settings | None) -> Path | None:
        try:
            name = table_name(arg)
        except ValueError:
            return None
        found = self.readable.items() if self.readable else (
            (path, spec) for path in spec_files(self.folder) if (spec := _valid_or_none(path)) is not None)
        return next((path for path, spec in found
                     if (spec.table_name(settings) if settings is not None else spec.sink.table) == name), None)

    def upstream(self, name: str, reader: str) -> PipelineSpec:
        """The spec of the pipeline ``name`` (a Delta source's, an asset schedule's); a SpecError of
        ``reader``'s if there is no valid one."""
        found = self.get(name)
        if found is None:  # valid on its own but refused by the folder's checks: still its table
            named = self._first_named(name)
            found = named[1] if named is not None else None
        if found is None:
            raise SpecError(reader, [f"source.pipeline: no valid pipeline named {name!r} in {self.folder}"])
        return found

    def with_upstream(self, spec: PipelineSpec, settings: Settings) -> PipelineSpec:
        """``spec``, with a Delta source that names a pipeline given that pipeline's table (``source.path``); one
        that names a table (``source.table``) given the folder of the pipeline whose table has that name (none:
        left to the run, which asks the catalog)."""
        source = spec.source
        if not isinstance(source, DeltaSource) or source.path:
            return spec
        if source.table:
            writer = self.table_writer(source.table, settings)
            if writer is None:
                return spec
            return spec.model_copy(update={"source": source.model_copy(
                update={"path": writer.sink_path(settings)})})
        if not source.pipeline:
            return spec
        table = self.upstream(source.pipeline, spec.name).sink_path(settings)
        return spec.model_copy(update={"source": source.model_copy(update={"path": table})})

    def table_writer(self, name: str, settings: Settings) -> PipelineSpec | None:
        """The valid spec whose sink table has the catalog name ``name`` (``schema.table``), or None."""
        return next((s for s in self.readable.values() if s.table_name(settings) == name), None)


def _claimed_twice(name: str, path: Path, paths: list[Path], specs: dict[Path, PipelineSpec]) -> str:
    """Why the spec at ``path`` is refused: ``name`` is also the name, or an earlier name, of the specs at
    ``paths``. A renamed pipeline's old spec left beside the new one would run the same pipeline twice."""
    others = ", ".join(display_path(p) for p in paths if p != path)
    if all(specs[p].name == name for p in paths):
        return f"name: {name!r} is also used by {others}; names are unique"
    renamed = next(p for p in paths if name in specs[p].previous_names)
    old = [p for p in paths if specs[p].name == name]
    if old:
        return (f"name: {name!r} is the name of {', '.join(display_path(p) for p in old)} and an earlier name "
                f"(previous_names) of {display_path(renamed)} ({specs[renamed].name}): both would run the same "
                f"pipeline, with one table and checkpoint. Remove the old spec, or {name!r} from previous_names")
    return (f"previous_names: {name!r} is also an earlier name of {others}: one earlier name, one pipeline; "
            "remove it from all but the pipeline it was")


def _valid_or_none(path: Path) -> PipelineSpec | None:
    try:
        return load_spec(path)
    except SpecError:
        return None


def resolve_upstream(spec: PipelineSpec, settings: Settings) -> PipelineSpec:
    """``spec`` with its upstream table resolved from the pipelines folder (nothing to do for other sources)."""
    source = spec.source
    if not isinstance(source, DeltaSource) or not (source.pipeline or source.table) or source.path:
        return spec
    return PipelineCatalog.load(settings.pipelines_dir).with_upstream(spec, settings)


def sinks_of(catalog: PipelineCatalog, settings: Settings) -> dict[str, list[tuple[str, Path]]]:
    """The sink table of every spec of the folder that is valid on its own: table -> [(pipeline, spec file)]."""
    found: dict[str, list[tuple[str, Path]]] = {}
    for path, spec in catalog.readable.items():
        found.setdefault(spec.sink_path(settings), []).append((spec.name, path))
    return found


def sink_conflict(spec: PipelineSpec, spec_path: Path, settings: Settings,
                  sinks: dict[str, list[tuple[str, Path]]]) -> str | None:
    """Why the next run of ``spec`` would be refused over its sink table, known without a JVM; None if it
    would not. The table records the pipeline that writes it (its Delta log's ``sluice.pipeline``): another
    name there is the run's own refusal (a copied spec, a renamed pipeline). A table that does not exist yet,
    shared with another spec of the folder (``sinks``: :func:`sinks_of`): whichever runs first takes it, and
    the other is refused."""
    from sluice.storage.delta_log import foreign_table_refusal, table_owner

    table = spec.sink_path(settings)
    owner = table_owner(table)
    if owner and owner not in spec.names:
        return foreign_table_refusal(table, owner, spec.name)
    if owner:
        return None
    here = Path(spec_path).resolve()
    sharing = [f"{name} ({display_path(path)})" for name, path in sinks.get(table, [])
               if name not in spec.names and path.resolve() != here]
    if sharing:
        return (f"sink.path: the table {table} is also the sink of {', '.join(sharing)}: the first of them to run "
                "would own it and every other one's runs would be refused. Give each pipeline its own sink.path")
    return None
