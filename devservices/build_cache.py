"""Build outputs that depend only on pinned versions, kept outside the clone and shared by every clone of the
user, the way Maven keeps ``~/.m2``: a second clone (or CI after a session on the same machine) copies them
instead of building them again.

The cache lives in ``$SLUICE_CACHE_DIR``, else ``$XDG_CACHE_HOME/sluice``, else ``~/.cache/sluice``. An entry is
a folder named by its key -- every input that changes the output (the pinned version, the toolchain's version, the
build flags) -- holding the output and ``manifest.json`` with its sha256. An entry is checked before each use: a
file whose digest differs from the manifest's (a half-written copy, a disk error, a hand edit) is refused and built
again. ``make clean`` leaves the cache; ``make clean-cache`` deletes it.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path


def cache_root(environ: dict[str, str] | None = None) -> Path:
    env = os.environ if environ is None else environ
    if env.get("SLUICE_CACHE_DIR"):
        return Path(env["SLUICE_CACHE_DIR"]).expanduser()
    base = Path(env["XDG_CACHE_HOME"]).expanduser() if env.get("XDG_CACHE_HOME") else Path.home() / ".cache"
    return base / "sluice"


def digest(path: Path) -> str:
    sha = hashlib.sha256()
    with path.open("rb") as stream:
        for block in iter(lambda: stream.read(1 << 20), b""):
            sha.update(block)
    return sha.hexdigest()


def _safe(text: str) -> str:
    return "".join(c if c.isalnum() or c in "._-" else "_" for c in text)


@dataclass(frozen=True)
class CachedFile:
    """One cached build output: ``<cache>/<kind>/<key>/<name>`` and its manifest."""

    root: Path
    kind: str
    key: dict[str, str]
    name: str

    @property
    def folder(self) -> Path:
        label = "-".join(_safe(v) for v in self.key.values())
        # the label is for people; the digest makes two keys that flatten to one label differ
        tag = hashlib.sha256(json.dumps(self.key, sort_keys=True).encode()).hexdigest()[:12]
        return self.root / self.kind / f"{label}-{tag}"

    @property
    def path(self) -> Path:
        return self.folder / self.name

    @property
    def manifest(self) -> Path:
        return self.folder / "manifest.json"

    def valid(self) -> bool:
        """The output is there, its manifest names this key, and its bytes have the recorded digest."""
        try:
            manifest = json.loads(self.manifest.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return False
        return (manifest.get("key") == self.key and self.path.is_file()
                and manifest.get("sha256") == digest(self.path))

    def store(self, built: Path) -> None:
        """Move a freshly built ``built`` into the cache, then write the manifest last (an entry without one is
        not used)."""
        self.folder.mkdir(parents=True, exist_ok=True)
        self.manifest.unlink(missing_ok=True)
        partial = self.path.with_name(self.name + ".partial")
        shutil.move(str(built), partial)
        os.replace(partial, self.path)
        manifest = {"key": self.key, "sha256": digest(self.path)}
        tmp = self.manifest.with_name("manifest.json.tmp")
        tmp.write_text(json.dumps(manifest, indent=1), encoding="utf-8")
        os.replace(tmp, self.manifest)

    def copy_to(self, target: Path) -> None:
        """Install the (checked) output at ``target``, atomically, keeping its mode."""
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(target.name + ".tmp")
        shutil.copy2(self.path, tmp)
        os.replace(tmp, target)
