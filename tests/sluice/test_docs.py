"""The docs hold to the code: the spec reference is what the models render, every spec field says what it
is, the README stays short, and no relative link in the README or docs/ points at nothing."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from pydantic import BaseModel

from sluice import spec
from sluice.spec import reference as spec_reference

PROJECT = Path(__file__).resolve().parents[2]
README = PROJECT / "README.md"
DOCS = PROJECT / "docs"
README_LIMIT = 15_000

_FENCE_RE = re.compile(r"^(```|~~~).*?^\1[^\n]*$", re.MULTILINE | re.DOTALL)
_CODE_SPAN_RE = re.compile(r"(`+)(?:(?!\1).)+?\1", re.DOTALL)
_LINK_RE = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_HEADING_RE = re.compile(r"^#{1,6}\s+(.*?)\s*#*\s*$", re.MULTILINE)


def _pages() -> list[Path]:
    return [README, *sorted(DOCS.glob("*.md"))]


def _prose(path: Path) -> str:
    """The file's Markdown without fenced code blocks and code spans: links and headings only count outside."""
    return _FENCE_RE.sub("", path.read_text(encoding="utf-8"))


def _links(path: Path) -> list[str]:
    return _LINK_RE.findall(_CODE_SPAN_RE.sub(lambda m: "x" * len(m.group(0)), _prose(path)))


def _relative(target: str) -> bool:
    return not re.match(r"^([a-z][a-z0-9+.-]*:|//)", target, re.IGNORECASE)


def _anchors(path: Path) -> set[str]:
    """GitHub's heading ids: lower case, punctuation dropped, spaces as hyphens, repeats numbered."""
    seen: dict[str, int] = {}
    anchors = set()
    for heading in _HEADING_RE.findall(_prose(path)):
        text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).replace("`", "")
        slug = re.sub(r"[^\w\- ]", "", text.strip().lower()).replace(" ", "-")
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        anchors.add(slug if count == 0 else f"{slug}-{count}")
    return anchors


def _spec_models() -> set[type[BaseModel]]:
    """Every model class defined in the sluice.spec package (subclasses of its base model, at any depth)."""
    from sluice.spec.common import _Model

    found, todo = set(), [_Model]
    while todo:
        for sub in todo.pop().__subclasses__():
            if sub.__module__.startswith(spec.__name__ + ".") and sub not in found:
                found.add(sub)
                todo.append(sub)
    return found


def test_spec_reference_is_what_the_models_render():
    # Given the committed spec reference
    committed = (DOCS / "spec.md").read_text(encoding="utf-8")

    # Then it is exactly what the models render now
    assert committed == spec_reference.render(), (
        "docs/spec.md differs from the spec models (sluice/spec/): run `make docs` and commit docs/spec.md"
    )


def test_the_reference_walks_every_spec_model_from_the_pipeline_spec():
    # When the generator walks the field annotations from PipelineSpec
    walked = spec_reference.models()

    # Then it finds every model of the spec module, nested ones and every member of the source union
    assert next(iter(walked)) is spec.PipelineSpec
    assert set(walked) == _spec_models()
    assert {spec.FileSource, spec.KafkaSource, spec.DeltaSource, spec.KafkaValue, spec.ReferenceTable} <= set(walked)
    # and says where each sits in a spec
    assert any("`source` with `format`: `kafka`" in where for where in walked[spec.KafkaSource])
    assert walked[spec.ReferenceTable] == ["`transform.tables.<name>`"]
    assert walked[spec.Expectation] == ["`expectations[]`"]


@pytest.mark.parametrize("model", sorted(_spec_models(), key=lambda m: m.__name__), ids=lambda m: m.__name__)
def test_every_field_of_every_spec_model_has_a_description(model: type[BaseModel]):
    # Given a model reachable from PipelineSpec
    assert model in spec_reference.models()

    # Then each of its fields has a docstring, which the reference shows
    missing = [name for name, info in model.model_fields.items() if not (info.description or "").strip()]
    assert not missing, f"{model.__name__}: add a docstring under field(s) {', '.join(missing)} in sluice/spec/"
    reference = spec_reference.render()
    for name, info in model.model_fields.items():
        assert f"| `{info.alias or name}` |" in reference


def test_the_reference_renders_types_defaults_and_links_from_the_models():
    reference = spec_reference.render()

    # a required field, a constrained one, a discriminated union, a default factory model, a nested default
    assert "| `name` | string (length ≤ 200, matching `^[a-z][a-z0-9_]*$`) | **required** |" in reference
    assert "| `timeout_seconds` | integer (> 0, ≤ 600) | `30` |" in reference
    assert ("| `source` | [FileSource](#filesource) \\| [KafkaSource](#kafkasource) \\| [DeltaSource](#deltasource) "
            "| **required** |") in reference
    assert "| `maintenance` | [Maintenance](#maintenance) | the defaults of [Maintenance](#maintenance) |" in reference
    assert "| `vacuum_retention_hours` | integer (≥ 0) | `168` |" in reference
    # an alias is the name a spec writes
    assert "| `schema` | string \\| null | `null` |" in reference
    assert "`schema_`" not in reference


def test_check_mode_exits_1_and_names_the_command_when_the_file_differs(tmp_path: Path, capsys):
    # Given a stale copy of the reference
    stale = tmp_path / "spec.md"
    stale.write_text("# Spec reference\n\nold\n", encoding="utf-8")

    # When it is checked
    code = spec_reference.main(["--check", "--output", str(stale)])

    # Then the check fails, names the command, and leaves the file alone
    assert code == 1
    assert "make docs" in capsys.readouterr().err
    assert stale.read_text(encoding="utf-8") == "# Spec reference\n\nold\n"

    # When it is written, the check passes
    assert spec_reference.main(["--output", str(stale)]) == 0
    assert spec_reference.main(["--check", "--output", str(stale)]) == 0
    assert stale.read_text(encoding="utf-8") == spec_reference.render()


def test_readme_is_under_15_kb():
    size = README.stat().st_size
    assert size < README_LIMIT, f"README.md is {size} bytes; move detail into docs/ (limit {README_LIMIT})"


def test_readme_keeps_the_two_commands_and_links_every_docs_page():
    text = README.read_text(encoding="utf-8")

    # the two commands, with the test command CI runs (.ci/run: make test)
    assert "make demo" in text and "make test" in text
    assert "make test" in (PROJECT / ".ci" / "run").read_text(encoding="utf-8")
    # spec.py's unknown-field error points readers at README.md, 'Writing a spec'
    assert "## Writing a spec" in text
    # every docs page is reachable from the README
    linked = {(README.parent / target.split("#")[0]).resolve() for target in _links(README) if _relative(target)}
    unlinked = [p.name for p in sorted(DOCS.glob("*.md")) if p.resolve() not in linked]
    assert not unlinked, f"docs page(s) not linked from README.md: {', '.join(unlinked)}"


@pytest.mark.parametrize("page", _pages(), ids=lambda p: str(p.relative_to(PROJECT)))
def test_every_relative_link_resolves(page: Path):
    # Given every link and image in the page, outside code
    broken = []
    for target in _links(page):
        if not _relative(target):
            continue
        file_part, _, anchor = target.partition("#")
        resolved = (page.parent / file_part).resolve() if file_part else page
        # Then the file exists, and a heading anchor into a Markdown page names one of its headings
        if not resolved.exists():
            broken.append(f"{target} (no such file)")
        elif anchor and resolved.suffix == ".md" and anchor not in _anchors(resolved):
            broken.append(f"{target} (no heading #{anchor} in {resolved.name})")
    assert not broken, f"{page.relative_to(PROJECT)}: broken link(s): {'; '.join(broken)}"
