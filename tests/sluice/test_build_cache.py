"""The user's build cache (devservices.build_cache): outputs keyed by every input that changes them, checked by their
digest before use, kept outside the clone."""

from __future__ import annotations

import json
from pathlib import Path

from devservices.build_cache import CachedFile, cache_root
from devservices.s3_server import BUILD_FLAGS, SEAWEEDFS_VERSION, cached_binary


def built(tmp_path: Path, text: bytes = b"\x7fELF a binary") -> Path:
    output = tmp_path / "out" / "weed"
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_bytes(text)
    output.chmod(0o755)
    return output


def test_the_cache_is_the_users_not_the_clones():
    assert cache_root({"HOME": "/home/ann"}) == Path.home() / ".cache" / "sluice"
    assert cache_root({"XDG_CACHE_HOME": "/var/cache/ann"}) == Path("/var/cache/ann/sluice")
    assert cache_root({"SLUICE_CACHE_DIR": "/srv/cache", "XDG_CACHE_HOME": "/x"}) == Path("/srv/cache")


def test_an_entry_stored_is_valid_and_installs_a_copy_with_its_mode(tmp_path):
    entry = CachedFile(tmp_path / "cache", "seaweedfs", {"module": "v1", "go": "go1.26.8"}, "weed")
    assert not entry.valid()  # nothing there yet
    entry.store(built(tmp_path))
    assert entry.valid()
    assert json.loads(entry.manifest.read_text())["key"] == {"module": "v1", "go": "go1.26.8"}
    target = tmp_path / "var" / "bin" / "weed"
    entry.copy_to(target)
    assert target.read_bytes() == b"\x7fELF a binary" and target.stat().st_mode & 0o777 == 0o755


def test_a_changed_or_half_written_output_is_not_used(tmp_path):
    entry = CachedFile(tmp_path / "cache", "seaweedfs", {"module": "v1"}, "weed")
    entry.store(built(tmp_path))
    entry.path.write_bytes(b"\x7fELF a binar")  # cut short: its digest differs from the manifest's
    assert not entry.valid()
    entry.store(built(tmp_path))
    entry.manifest.write_text("{", encoding="utf-8")  # a manifest cut short
    assert not entry.valid()
    entry.manifest.unlink()  # an output without its manifest (the build stopped before writing it)
    assert not entry.valid()


def test_every_input_of_the_build_is_in_its_key(tmp_path):
    first = CachedFile(tmp_path, "seaweedfs", {"module": "v1", "go": "go1.26.8"}, "weed")
    other_go = CachedFile(tmp_path, "seaweedfs", {"module": "v1", "go": "go1.27.0"}, "weed")
    assert first.folder != other_go.folder
    first.store(built(tmp_path))
    assert first.valid() and not other_go.valid()
    # the SeaweedFS binary: its pinned module version, the Go version, the flags and the machine
    key = cached_binary(go="go1.26.8").key
    assert key["module"] == SEAWEEDFS_VERSION and key["go"] == "go1.26.8" and key["flags"] == BUILD_FLAGS
    assert key["arch"]
