"""sluice's local file system (jvm/files LocalFileSystem, LocalFs): the session's ``file:`` paths go through it,
and it answers as Hadoop's own does -- permissions set, a file, a folder, a symbolic link and a missing path's
status, FileContext's renames -- without starting a chmod or readlink process for each."""

from __future__ import annotations

import os
import stat

import pytest
from py4j.protocol import Py4JJavaError

from sluice.spark_conf import LOCAL_FILE_SYSTEM


@pytest.fixture
def hadoop(spark):
    jvm = spark._jvm
    conf = spark.sparkContext._jsc.hadoopConfiguration()
    return jvm, conf, jvm.org.apache.hadoop.fs


def test_the_session_renames_through_sluices_file_context_and_its_raw_file_system(spark, hadoop):
    jvm, conf, fs = hadoop
    assert dict(LOCAL_FILE_SYSTEM) == {k: conf.get(k) for k in LOCAL_FILE_SYSTEM}
    context = fs.FileContext.getFileContext(jvm.java.net.URI("file:///"), conf)
    assert context.getDefaultFileSystem().getClass().getName() == "dev.sluice.files.LocalFs"
    created = fs.FileSystem.newInstance(jvm.java.net.URI("file:///"), conf)
    assert created.getClass().getName() == "dev.sluice.files.LocalFileSystem"
    assert created.getRawFileSystem().getClass().getName() == "dev.sluice.files.LocalFileSystem$Raw"


def test_it_answers_as_hadoops_own(spark, hadoop, tmp_path):
    jvm, conf, fs = hadoop
    ours = jvm.dev.sluice.files.LocalFileSystem.Raw()
    theirs = fs.RawLocalFileSystem()
    for system in (ours, theirs):
        system.initialize(jvm.java.net.URI("file:///"), conf)

    def path(name: str):
        return fs.Path(f"file:{tmp_path / name}")

    (tmp_path / "a.txt").write_text("a")
    (tmp_path / "folder").mkdir()
    os.symlink(tmp_path / "a.txt", tmp_path / "link")
    for name in ("a.txt", "folder", "link"):
        mine, hadoops = ours.getFileLinkStatus(path(name)), theirs.getFileLinkStatus(path(name))
        assert (mine.isFile(), mine.isDirectory(), mine.isSymlink(), mine.getLen(), mine.getModificationTime()) == (
            hadoops.isFile(), hadoops.isDirectory(), hadoops.isSymlink(), hadoops.getLen(),
            hadoops.getModificationTime()), name
    for system in (ours, theirs):
        with pytest.raises(Py4JJavaError, match="FileNotFoundException"):
            system.getFileLinkStatus(path("missing"))

    for mode in (0o640, 0o700, 0o644):
        ours.setPermission(path("a.txt"), fs.permission.FsPermission(mode))
        assert stat.S_IMODE((tmp_path / "a.txt").stat().st_mode) == mode
    with pytest.raises(Py4JJavaError, match="FileNotFoundException"):
        ours.setPermission(path("missing"), fs.permission.FsPermission(0o644))
    created = ours.create(path("folder/new.txt"), fs.permission.FsPermission(0o600), False, 4096, 1, 1024, None)
    created.close()
    assert stat.S_IMODE((tmp_path / "folder" / "new.txt").stat().st_mode) == 0o600

    # FileContext's rename, as Spark renames a checkpoint file into place: refused onto a file, unless told
    context = fs.FileContext.getFileContext(jvm.java.net.URI("file:///"), conf)
    none, overwrite = (jvm.org.apache.hadoop.fs.Options.Rename.valueOf(n) for n in ("NONE", "OVERWRITE"))
    (tmp_path / "b.txt").write_text("b")
    with pytest.raises(Py4JJavaError, match="FileAlreadyExistsException"):
        context.rename(path("b.txt"), path("a.txt"), _renames(jvm, none))
    context.rename(path("b.txt"), path("a.txt"), _renames(jvm, overwrite))
    assert (tmp_path / "a.txt").read_text() == "b" and not (tmp_path / "b.txt").exists()


def _renames(jvm, option):
    options = jvm.java.lang.reflect.Array.newInstance(jvm.java.lang.Class.forName(
        "org.apache.hadoop.fs.Options$Rename"), 1)
    options[0] = option
    return options
