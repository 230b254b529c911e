package dev.sluice.files;

import java.io.File;
import java.io.FileNotFoundException;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.attribute.PosixFilePermission;
import java.util.EnumSet;
import java.util.Set;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.RawLocalFileSystem;
import org.apache.hadoop.fs.permission.FsPermission;
import org.apache.hadoop.io.nativeio.NativeIO;

/**
 * Hadoop's local file system ({@code file:}) without a process for each file it creates and each rename.
 *
 * <p>Without Hadoop's native library (which PySpark does not ship), {@link RawLocalFileSystem} sets a new
 * file's or folder's permissions by starting {@code chmod}, and asks whether a path is a symbolic link by
 * starting {@code readlink} -- twice per path on every rename (its own check and {@code FileContext}'s). A
 * streaming run's commit renames its offsets, commits and Delta log files: some 60 processes a run of one
 * batch, ~9 ms of wall time each. Here the same answers come from Java's own file API; a symbolic link, a
 * sticky bit, or a machine with the native library still goes Hadoop's way. Set as {@code fs.file.impl}
 * ({@link LocalFs} as {@code fs.AbstractFileSystem.file.impl}) by sluice's Spark settings.
 */
public class LocalFileSystem extends org.apache.hadoop.fs.LocalFileSystem {
  public LocalFileSystem() {
    super(new Raw());
  }

  /** The raw (checksum-less) file system under {@link LocalFileSystem} and {@link LocalFs}. */
  public static final class Raw extends RawLocalFileSystem {
    private static final PosixFilePermission[] BITS = {
      PosixFilePermission.OTHERS_EXECUTE, PosixFilePermission.OTHERS_WRITE, PosixFilePermission.OTHERS_READ,
      PosixFilePermission.GROUP_EXECUTE, PosixFilePermission.GROUP_WRITE, PosixFilePermission.GROUP_READ,
      PosixFilePermission.OWNER_EXECUTE, PosixFilePermission.OWNER_WRITE, PosixFilePermission.OWNER_READ,
    };

    @Override
    public void setPermission(Path p, FsPermission permission) throws IOException {
      if (NativeIO.isAvailable() || permission.getStickyBit()) {
        super.setPermission(p, permission);
        return;
      }
      short mode = permission.toShort();
      Set<PosixFilePermission> bits = EnumSet.noneOf(PosixFilePermission.class);
      for (int i = 0; i < BITS.length; i++) {
        if ((mode & (1 << i)) != 0) {
          bits.add(BITS[i]);
        }
      }
      File file = pathToFile(p);
      try {
        Files.setPosixFilePermissions(file.toPath(), bits);
      } catch (NoSuchFileException e) {
        throw new FileNotFoundException("File " + p + " does not exist");
      }
    }

    /** A path that is no symbolic link: its status, as Hadoop gives it once {@code readlink} said so. */
    @Override
    public FileStatus getFileLinkStatus(Path f) throws IOException {
      if (Files.isSymbolicLink(pathToFile(f).toPath())) {
        return super.getFileLinkStatus(f);
      }
      return getFileStatus(f);
    }
  }
}
