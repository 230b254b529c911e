"""One file-system layer for everything sluice reads and writes itself, addressed by URI.

A local path (``/var/lake/cp``), ``file:`` or an object store URI (``s3a://bucket/cp``, ``s3://...``) gives a
:class:`Storage` rooted there; its methods take paths relative to that root. It is Apache Arrow's file
system layer (``pyarrow.fs``): it needs no JVM (the launcher and ``sluice`` commands read checkpoints
without starting Spark), it speaks local disk and the S3 API with one interface, and pyarrow is already
installed (delta-rs, the ledger's writer, uses it). Spark's own files stay Spark's: the driver writes
sluice's files in a checkpoint through Spark's CheckpointFileManager (:mod:`spark_jobs.sinks.checkpoint_files`),
the way Spark writes offsets and commits.
"""

from __future__ import annotations

import functools
import posixpath
import uuid
from dataclasses import dataclass
from urllib.parse import unquote

from pyarrow import fs as pafs

from sluice.storage.object_store import (
    OBJECT_STORE_SCHEMES,
    ObjectStore,
    bucket_and_key,
)


@dataclass(frozen=True)
class Entry:
    """A file or folder found by :meth:`Storage.list`."""

    name: str
    is_file: bool
    size: int
    mtime_ns: int


def is_local_uri(uri: str) -> bool:
    """Whether ``uri`` names local disk (a plain path or ``file:``), without opening any file system."""
    return uri.startswith("file:") or "://" not in uri


def local_path(uri: str) -> str | None:
    """``uri`` as a local file system path; None for a remote one."""
    return _resolve(uri)[1] if is_local_uri(uri) else None


@functools.lru_cache(maxsize=8)
def _store_filesystem(store: ObjectStore) -> pafs.FileSystem:
    """One Arrow S3 client per store settings, shared by every Storage on it (a client sets up the AWS SDK's
    connection pool: not once per checkpoint file read)."""
    return store.arrow()


def _resolve(uri: str) -> tuple[pafs.FileSystem, str]:
    if uri.startswith(OBJECT_STORE_SCHEMES):
        # Hadoop's s3a:// is the S3 API: the store's endpoint and credentials from the AWS variables
        bucket, key = bucket_and_key(uri)
        return _store_filesystem(ObjectStore.from_env()), f"{bucket}/{key}".rstrip("/")
    if uri.startswith("file:"):
        path = uri[5:]
        if path.startswith("//"):
            path = path[2:]
        return pafs.LocalFileSystem(), unquote(path)
    if "://" in uri:
        return pafs.FileSystem.from_uri(uri)
    return pafs.LocalFileSystem(), posixpath.abspath(uri)


class Storage:
    """Files under one root URI. Missing files read as None and list as nothing: callers ask, not guess."""

    def __init__(self, uri: str) -> None:
        self.uri = uri.rstrip("/") or uri
        self.fs, self.root = _resolve(self.uri)
        self.local = isinstance(self.fs, pafs.LocalFileSystem)

    def __repr__(self) -> str:
        return f"Storage({self.uri!r})"

    def path(self, *parts: str | int) -> str:
        return posixpath.join(self.root, *(str(p) for p in parts))

    def uri_of(self, *parts: str | int) -> str:
        """The URI of a path under the root, as Spark and the rest of sluice name it."""
        return posixpath.join(self.uri, *(str(p) for p in parts)) if parts else self.uri

    def info(self, *parts: str | int) -> pafs.FileInfo:
        return self.fs.get_file_info(self.path(*parts))

    def exists(self, *parts: str | int) -> bool:
        return self.info(*parts).type != pafs.FileType.NotFound

    def is_file(self, *parts: str | int) -> bool:
        return self.info(*parts).type == pafs.FileType.File

    def is_dir(self, *parts: str | int) -> bool:
        return self.info(*parts).type == pafs.FileType.Directory

    def read_text(self, *parts: str | int) -> str | None:
        """The file's text, or None when there is no such file."""
        try:
            with self.fs.open_input_stream(self.path(*parts)) as stream:
                return stream.read().decode("utf-8")
        except FileNotFoundError:
            return None
        except OSError as err:  # Arrow reports some missing objects as a plain OSError
            if not self.exists(*parts):
                return None
            raise err

    def write_text(self, *parts_and_text: str | int) -> None:
        """``write_text(*parts, text)``: the file written whole. On local disk a hidden temporary file is
        renamed into place; an object store's put is atomic by itself."""
        *parts, text = parts_and_text
        self.write_bytes(posixpath.join(*(str(p) for p in parts)), str(text).encode("utf-8"))

    def list(self, *parts: str | int) -> list[Entry]:
        """The entries of a folder (not recursive); empty when there is no such folder."""
        selector = pafs.FileSelector(self.path(*parts), allow_not_found=True, recursive=False)
        return [Entry(posixpath.basename(i.path), i.type == pafs.FileType.File, i.size or 0, i.mtime_ns or 0)
                for i in self.fs.get_file_info(selector)]

    def walk_files(self, *parts: str | int) -> list[tuple[str, int]]:
        """Every file under a folder, recursively: (path relative to that folder, size)."""
        base = self.path(*parts)
        selector = pafs.FileSelector(base, allow_not_found=True, recursive=True)
        return [(posixpath.relpath(i.path, base), i.size or 0) for i in self.fs.get_file_info(selector)
                if i.type == pafs.FileType.File]

    def make_dir(self, *parts: str | int) -> None:
        """Create a folder (and its parents); nothing happens if it is there."""
        self.fs.create_dir(self.path(*parts), recursive=True)

    def walk_entries(self, *parts: str | int) -> list[Entry]:
        """Every file under a folder, recursively, with its size and modification time (``name``: the path
        relative to that folder)."""
        base = self.path(*parts)
        selector = pafs.FileSelector(base, allow_not_found=True, recursive=True)
        return [Entry(posixpath.relpath(i.path, base), True, i.size or 0, i.mtime_ns or 0)
                for i in self.fs.get_file_info(selector) if i.type == pafs.FileType.File]

    def numbered(self, *parts: str | int, suffix: str = "") -> list[int]:
        """The numbers naming a folder's files (``offsets/0``, ``sources/0/9.compact``), ascending."""
        found = []
        for entry in self.list(*parts):
            stem = entry.name[: -len(suffix)] if suffix and entry.name.endswith(suffix) else entry.name
            if stem.isdigit() and (not suffix or entry.name.endswith(suffix)):
                found.append(int(stem))
        return sorted(found)

    def delete(self, *parts: str | int) -> None:
        """Delete a file (nothing happens if it is not there)."""
        try:
            self.fs.delete_file(self.path(*parts))
        except FileNotFoundError:
            pass

    def delete_dir(self, *parts: str | int) -> None:
        if self.is_dir(*parts):
            self.fs.delete_dir(self.path(*parts))

    def copy_to(self, target: Storage) -> bool:
        """Copy every file under this root to ``target``'s root (another folder or store); False when there is
        nothing here. File by file, each closed explicitly: a failed upload raises (Arrow's ``copy_files``
        only logs the error of an upload that fails when its stream is closed, and the file is missing)."""
        if not self.is_dir():
            return False
        for relative, _size in self.walk_files():
            with self.fs.open_input_stream(self.path(relative)) as stream:
                data = stream.read()
            target.write_bytes(relative, data)
        return True

    def write_bytes(self, relative: str, data: bytes) -> None:
        """A file written whole (see :meth:`write_text`)."""
        target = self.path(relative)
        parent = posixpath.dirname(target)
        self.fs.create_dir(parent, recursive=True)
        if not self.local:
            with self.fs.open_output_stream(target) as out:
                out.write(data)
            return
        tmp = posixpath.join(parent, f".{posixpath.basename(target)}.{uuid.uuid4().hex[:8]}.tmp")
        with self.fs.open_output_stream(tmp) as out:
            out.write(data)
        self.fs.move(tmp, target)

    def move(self, source: str, target: str) -> None:
        """Move a file or folder within this storage (paths relative to the root). An object store has no
        folders to rename: a folder's files are copied, then deleted (not atomic: a move cut short leaves
        the rest of the files at ``source``, and moving again carries them)."""
        if self.local or self.is_file(source):
            self.fs.move(self.path(source), self.path(target))
            return
        for relative, _size in self.walk_files(source):  # the store copies each object itself (CopyObject)
            self.fs.create_dir(posixpath.dirname(self.path(target, relative)), recursive=True)
            self.fs.copy_file(self.path(source, relative), self.path(target, relative))
        self.fs.delete_dir(self.path(source))
