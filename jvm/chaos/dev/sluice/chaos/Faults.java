package dev.sluice.chaos;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.regex.Pattern;

import org.apache.hadoop.fs.Path;

/**
 * The faults of sluice's chaos tests, shared by the fault-injecting file systems (the local one and S3A's): each
 * reads its trigger from the environment and matches it against the path (its part after the scheme and the
 * authority: /folder/file on local disk, /key in a bucket) a file system is about to write or delete.
 *
 *   SLUICE_CHAOS_HALT_BEFORE         halt the JVM (as kill -9 would: no shutdown hook, no finally block, no
 *                                    flush) right before a file whose path matches is written or renamed into
 *   SLUICE_CHAOS_HALT_BEFORE_DELETE  the same, right before a file whose path matches is deleted
 *   SLUICE_CHAOS_HALT_ONCE           a file's path: halt only while that file does not exist, and create it first
 *                                    (a retried run then goes through)
 *   SLUICE_CHAOS_PAUSE_BEFORE        pause (once per JVM) right before a file whose path matches is written: the
 *   SLUICE_CHAOS_PAUSE_FILE          file SLUICE_CHAOS_PAUSE_FILE is created, and the write waits until somebody
 *                                    deletes it (at most 10 minutes). The chaos harness stops the object store in
 *                                    that pause: the write then meets a store that does not answer.
 */
public final class Faults {
    public static final String HALT_ENV = "SLUICE_CHAOS_HALT_BEFORE";
    public static final String DELETE_ENV = "SLUICE_CHAOS_HALT_BEFORE_DELETE";
    public static final String ONCE_ENV = "SLUICE_CHAOS_HALT_ONCE";
    public static final String PAUSE_ENV = "SLUICE_CHAOS_PAUSE_BEFORE";
    public static final String PAUSE_FILE_ENV = "SLUICE_CHAOS_PAUSE_FILE";
    public static final int EXIT_CODE = 137; // what a shell reports for a process killed by SIGKILL
    private static final long PAUSE_LIMIT_MS = 600_000;
    private static final Pattern HALT = compile(System.getenv(HALT_ENV));
    private static final Pattern HALT_DELETE = compile(System.getenv(DELETE_ENV));
    private static final Pattern PAUSE = compile(System.getenv(PAUSE_ENV));
    private static final AtomicBoolean PAUSED = new AtomicBoolean(false);

    private Faults() {
    }

    private static Pattern compile(String regex) {
        return regex == null || regex.isEmpty() ? null : Pattern.compile(regex);
    }

    /** Right before ``path`` is written (created, or renamed into). */
    public static void beforeWrite(Path path) {
        pauseIf(path);
        haltIf(HALT, path, "writing");
    }

    /** Right before ``path`` is deleted. */
    public static void beforeDelete(Path path) {
        haltIf(HALT_DELETE, path, "deleting");
    }

    private static boolean matches(Pattern pattern, Path path) {
        return pattern != null && pattern.matcher(path.toUri().getPath()).find();
    }

    private static void haltIf(Pattern pattern, Path path, String what) {
        if (matches(pattern, path) && firstTime()) {
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
            Files.createFile(Paths.get(flag));
            return true;
        } catch (IOException alreadyHalted) {
            return false;
        }
    }

    private static void pauseIf(Path path) {
        String file = System.getenv(PAUSE_FILE_ENV);
        if (!matches(PAUSE, path) || file == null || file.isEmpty() || !PAUSED.compareAndSet(false, true)) {
            return;
        }
        java.nio.file.Path flag = Paths.get(file);
        try {
            Files.writeString(flag, path.toString());
        } catch (IOException cannotSignal) {
            throw new IllegalStateException("sluice chaos: cannot write the pause file " + flag, cannotSignal);
        }
        System.err.println("sluice chaos: paused before writing " + path + " until " + flag + " is deleted");
        System.err.flush();
        long deadline = System.currentTimeMillis() + PAUSE_LIMIT_MS;
        while (Files.exists(flag) && System.currentTimeMillis() < deadline) {
            try {
                Thread.sleep(100);
            } catch (InterruptedException interrupted) {
                Thread.currentThread().interrupt();
                return;
            }
        }
        System.err.println("sluice chaos: resumed, writing " + path);
        System.err.flush();
    }
}
