package dev.sluice.chaos;

import java.io.IOException;
import java.net.URI;
import java.net.URISyntaxException;
import java.util.regex.Pattern;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.DelegateToFileSystem;
import org.apache.hadoop.fs.LocalFileSystem;
import org.apache.hadoop.fs.Path;

/**
 * Fault injection for sluice's chaos tests: the local file system, except that the JVM halts (as kill -9
 * would: no shutdown hook, no finally block, no flush) at the moment a file is about to be renamed into a
 * path matching the regex in the environment variable SLUICE_CHAOS_HALT_BEFORE.
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
 * With SLUICE_CHAOS_HALT_ONCE set to a file's path it halts only while that file does not exist, and creates it
 * first: a retried run (an Airflow retry) then goes through.
 *
 * Enabled per run with spark.hadoop.fs.AbstractFileSystem.file.impl=dev.sluice.chaos.HaltingLocalFs and
 * this jar on spark.driver.extraClassPath. Without the variable it is the plain local file system (checksummed,
 * like Hadoop's own LocalFs).
 */
public class HaltingLocalFs extends DelegateToFileSystem {
    public static final String ENV = "SLUICE_CHAOS_HALT_BEFORE";
    public static final String DELETE_ENV = "SLUICE_CHAOS_HALT_BEFORE_DELETE";
    public static final String ONCE_ENV = "SLUICE_CHAOS_HALT_ONCE";
    public static final int EXIT_CODE = 137; // what a shell reports for a process killed by SIGKILL
    private static final Pattern HALT = compile(System.getenv(ENV));
    private static final Pattern HALT_DELETE = compile(System.getenv(DELETE_ENV));

    public HaltingLocalFs(URI uri, Configuration conf) throws IOException, URISyntaxException {
        super(uri, new LocalFileSystem(), conf, "file", false);
    }

    @Override
    public int getUriDefaultPort() {
        return -1;
    }

    private static Pattern compile(String regex) {
        return regex == null || regex.isEmpty() ? null : Pattern.compile(regex);
    }

    private static void haltBefore(Path dst) {
        haltIf(HALT, dst, "writing");
    }

    private static void haltIf(Pattern pattern, Path path, String what) {
        if (pattern != null && pattern.matcher(path.toUri().getPath()).find() && firstTime()) {
            System.err.println("sluice chaos: halting the JVM before " + what + " " + path);
            System.err.flush();
            Runtime.getRuntime().halt(EXIT_CODE);
        }
    }

    private static boolean firstTime() {
        String flag = System.getenv(ONCE_ENV);
        if (flag == null || flag.isEmpty()) {
            return true;
        }
        try {
            java.nio.file.Files.createFile(java.nio.file.Paths.get(flag));
            return true;
        } catch (IOException alreadyHalted) {
            return false;
        }
    }

    @Override
    public void renameInternal(Path src, Path dst) throws IOException {
        haltBefore(dst);
        super.renameInternal(src, dst);
    }

    @Override
    public void renameInternal(Path src, Path dst, boolean overwrite) throws IOException {
        haltBefore(dst);
        super.renameInternal(src, dst, overwrite);
    }

    @Override
    public boolean delete(Path f, boolean recursive) throws IOException {
        haltIf(HALT_DELETE, f, "deleting");
        return super.delete(f, recursive);
    }
}
