package dev.sluice.chaos;

import java.io.IOException;
import java.net.URI;
import java.net.URISyntaxException;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.DelegateToFileSystem;
import org.apache.hadoop.fs.LocalFileSystem;
import org.apache.hadoop.fs.Path;

/**
 * Fault injection for sluice's chaos tests: the local file system, except for the faults of {@link Faults}
 * (the JVM halts, as kill -9 would, right before a file whose path matches SLUICE_CHAOS_HALT_BEFORE is renamed
 * into place).
 *
 * Spark's checkpoint logs (offsets/N, commits/N) and Delta's log (_delta_log/N.json) are written as a
 * temporary file renamed into place, through FileContext, so this stops a run at an exact point:
 *   .../commits/3$          after Delta committed batch 3, before the checkpoint records it
 *   .../_delta_log/\d+\.json$  after the data files are written, before the Delta commit
 *   .../offsets/3$           before batch 3 is planned
 *
 * SLUICE_CHAOS_HALT_BEFORE_DELETE does the same right before a file whose path matches is deleted (sluice's
 * quarantine marker is cleared that way, through Spark's CheckpointFileManager).
 *
 * Enabled per run with spark.hadoop.fs.AbstractFileSystem.file.impl=dev.sluice.chaos.HaltingLocalFs and
 * this jar on the driver's class path. Without the variables it is the plain local file system (checksummed,
 * like Hadoop's own LocalFs).
 */
public class HaltingLocalFs extends DelegateToFileSystem {
    public HaltingLocalFs(URI uri, Configuration conf) throws IOException, URISyntaxException {
        super(uri, new LocalFileSystem(), conf, "file", false);
    }

    @Override
    public int getUriDefaultPort() {
        return -1;
    }

    @Override
    public void renameInternal(Path src, Path dst) throws IOException {
        Faults.beforeWrite(dst);
        super.renameInternal(src, dst);
    }

    @Override
    public void renameInternal(Path src, Path dst, boolean overwrite) throws IOException {
        Faults.beforeWrite(dst);
        super.renameInternal(src, dst, overwrite);
    }

    @Override
    public boolean delete(Path f, boolean recursive) throws IOException {
        Faults.beforeDelete(f);
        return super.delete(f, recursive);
    }
}
