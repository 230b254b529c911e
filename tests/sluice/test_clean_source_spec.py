"""source.clean_source in the spec: defaults, durations, and the errors that name the field and the fix."""

from __future__ import annotations

import pytest

from sluice.spec import SpecError
from tests.helpers import make_spec, orders_spec


def with_clean(clean_source, path: str = "landing/orders"):
    spec = orders_spec()
    spec["source"] = {**spec["source"], "path": path, "clean_source": clean_source}
    return make_spec(spec)


def test_clean_source_fields_and_defaults(lake):
    archive = with_clean({"mode": "archive", "archive_dir": "archive/orders"}).source.clean_source
    assert (archive.mode, archive.retention, archive.retention_seconds) == ("archive", "7d", 7 * 86400)
    assert with_clean({"mode": "delete", "retention": 0}).source.clean_source.retention_seconds == 0
    assert with_clean({"mode": "delete", "retention": "90m"}).source.clean_source.retention_seconds == 5400
    assert make_spec(orders_spec()).source.clean_source is None  # files stay where they landed
    spec = with_clean({"mode": "archive", "archive_dir": "archive/orders"})
    assert spec.archive_path(lake) == str(lake.lake_root / "archive" / "orders")  # like source.path
    assert with_clean({"mode": "delete"}).archive_path(lake) is None


@pytest.mark.parametrize("clean_source, path, message", [
    ({"mode": "archive"}, "landing/orders",
     "source.clean_source.archive_dir: required with mode: archive; name the folder the ingested files go to, "
     "e.g. archive_dir: archive/orders (relative to the lake root)"),
    ({"mode": "delete", "archive_dir": "archive/orders"}, "landing/orders",
     "source.clean_source.archive_dir: only used with mode: archive (mode delete deletes the files); remove it "
     "or set mode: archive"),
    ({"mode": "move"}, "landing/orders", "source.clean_source.mode: 'move' is not allowed; use one of: archive, delete"),
    ({"mode": "delete", "retention": "7 days"}, "landing/orders",
     "source.clean_source.retention: '7 days' is not a duration: write a number and a unit, e.g. 30m, 2h, 1d "
     "(units: s, m, h, d)"),
    ({"mode": "archive", "archive_dir": "landing/orders/done"}, "landing/orders",
     "source.clean_source.archive_dir: landing/orders/done overlaps the source folder landing/orders (the same "
     "folder, or one inside the other): archived files would be read again as new input, or be moved onto files "
     "still landing. Name a folder outside it, e.g. archive/<pipeline name>"),
    ({"mode": "archive", "archive_dir": "/lake/landing"}, "/lake/landing/orders/",
     "source.clean_source.archive_dir: /lake/landing overlaps the source folder /lake/landing/orders/"),
])
def test_invalid_clean_source_names_the_field_and_the_fix(clean_source, path, message):
    with pytest.raises(SpecError, match=f"^test-spec: {_escape(message)}"):
        with_clean(clean_source, path)


def test_an_archive_overlapping_the_resolved_source_folder_is_refused_before_the_run(lake):
    from spark_jobs.sources.archive import CleanSourceError, check_folders

    # relative and absolute cannot be compared in the spec: the run compares them resolved
    spec = with_clean({"mode": "archive", "archive_dir": str(lake.lake_root / "landing" / "orders" / "old")})
    with pytest.raises(CleanSourceError, match=(
            f"^source.clean_source.archive_dir: {lake.lake_root}/landing/orders/old overlaps the source folder "
            f"{lake.lake_root}/landing/orders \\(the same folder, or one inside the other\\)")):
        check_folders(spec, lake)
    check_folders(with_clean({"mode": "archive", "archive_dir": str(lake.lake_root / "archive")}), lake)


def _escape(text: str) -> str:
    import re

    return re.escape(text)
