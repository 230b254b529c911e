package dev.sluice.chaos;

import java.io.IOException;
import java.util.EnumSet;

import org.apache.hadoop.fs.CreateFlag;
import org.apache.hadoop.fs.FSDataOutputStream;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.permission.FsPermission;
import org.apache.hadoop.fs.s3a.S3AFileSystem;
import org.apache.hadoop.util.Progressable;

/**
 * Fault injection for sluice's chaos tests on object storage: Hadoop's S3A file system, except for the faults
 * of {@link Faults}, matched against an object's key (/checkpoints/orders/commits/3).
 *
 * On S3A the two logs are written differently, and both pass here: Delta's log (S3SingleDriverLogStore) is
 * created in place (FileSystem.create of _delta_log/N.json, made visible when the stream closes), Spark's
 * checkpoint logs are a temporary object renamed into place (FileContext, through {@link HaltingS3A}). A halt
 * "before writing" a path stops either right before the object appears.
 *
 * Enabled per run with spark.hadoop.fs.s3a.impl=dev.sluice.chaos.HaltingS3AFileSystem and
 * spark.hadoop.fs.AbstractFileSystem.s3a.impl=dev.sluice.chaos.HaltingS3A, with this jar and S3A's on the
 * driver's class path (the same class loader as S3A's own classes).
 */
public class HaltingS3AFileSystem extends S3AFileSystem {
    @Override
    public FSDataOutputStream create(Path f, FsPermission permission, boolean overwrite, int bufferSize,
                                     short replication, long blockSize, Progressable progress) throws IOException {
        Faults.beforeWrite(f);
        return super.create(f, permission, overwrite, bufferSize, replication, blockSize, progress);
    }

    @Override
    public FSDataOutputStream createNonRecursive(Path f, FsPermission permission, EnumSet<CreateFlag> flags,
                                                 int bufferSize, short replication, long blockSize,
                                                 Progressable progress) throws IOException {
        Faults.beforeWrite(f);
        return super.createNonRecursive(f, permission, flags, bufferSize, replication, blockSize, progress);
    }

    @Override
    public boolean rename(Path src, Path dst) throws IOException {
        Faults.beforeWrite(dst);
        return super.rename(src, dst);
    }

    @Override
    public boolean delete(Path f, boolean recursive) throws IOException {
        Faults.beforeDelete(f);
        return super.delete(f, recursive);
    }
}
