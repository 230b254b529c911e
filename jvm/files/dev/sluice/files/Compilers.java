package dev.sluice.files;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.lang.management.ManagementFactory;
import javax.management.ObjectName;

/**
 * The driver's optimizing compiler (HotSpot's C2), held back until the run knows it has enough to do to repay it
 * ({@code SLUICE_DRIVER_JIT=auto}).
 *
 * <p>A short run on a 2-core machine spends most of its CPU compiling: C2 compiles hundreds of methods of Spark's
 * planning and Delta's log reading that a run of a few thousand rows calls a few thousand times, and exits before
 * the compiled code repays the compile. Such a driver is started with a compiler directive that excludes every
 * method from C2 ({@code -XX:CompilerDirectivesFile}, its file named {@value #HOLD_FILE}); the first tier (C1)
 * compiles as usual. Once the run learns that its new data is large (its new files' bytes, its Kafka backlog's
 * records, or a kind of run whose size it cannot tell), {@link #release} removes that directive: the methods that
 * grow hot from then on (the per-row work of the batches) are compiled by C2 as in any JVM. A method that reached
 * C2's threshold while held stays at C1's optimized tier; the per-row code of a large batch is not among them,
 * since the release comes before the batch runs.
 */
public final class Compilers {
  /** The name of the directive file that holds C2 back (written by the launcher, sluice/spark_conf.py). */
  public static final String HOLD_FILE = "c2-held.json";
  /** New files of at least this many bytes release C2 (Spark setting {@code spark.sluice.jit.fullBytes}). */
  public static final long FULL_BYTES = 64L << 20;
  /** A Kafka backlog of at least this many records releases C2 (Spark setting {@code spark.sluice.jit.fullRecords}). */
  public static final long FULL_RECORDS = 500_000L;

  private static final ObjectMapper JSON = new ObjectMapper();
  /** Whether this JVM was started with C2 held back (its directive file among its options). */
  private static final boolean STARTED_HELD = ManagementFactory.getRuntimeMXBean().getInputArguments().stream()
      .anyMatch(arg -> arg.startsWith("-XX:CompilerDirectivesFile=") && arg.endsWith(HOLD_FILE));
  private static final boolean QUICK =
      ManagementFactory.getRuntimeMXBean().getInputArguments().contains("-XX:TieredStopAtLevel=1");
  private static boolean released;
  private static String because;

  private Compilers() {}

  /** Whether C2 is held back now. */
  public static synchronized boolean held() {
    return STARTED_HELD && !released;
  }

  /**
   * C2 released for the rest of this JVM's life, saying {@code why}; false when it was not held (already
   * released, or never held: {@code full}, {@code quick}).
   */
  public static synchronized boolean release(String why) {
    if (!held()) {
      return false;
    }
    try {
      ManagementFactory.getPlatformMBeanServer().invoke(
          new ObjectName("com.sun.management:type=DiagnosticCommand"), "compilerDirectivesRemove",
          new Object[] {new String[0]}, new String[] {String[].class.getName()});
    } catch (Exception e) {
      throw new IllegalStateException("the JVM refused to remove the directive that holds its C2 compiler back", e);
    }
    released = true;
    because = why;
    return true;
  }

  /** C2 released when {@code bytes} of new files reach the session's {@code spark.sluice.jit.fullBytes}. */
  public static boolean releaseForBytes(org.apache.spark.sql.SparkSession spark, long bytes) {
    long threshold = Long.parseLong(spark.conf().get("spark.sluice.jit.fullBytes", String.valueOf(FULL_BYTES)));
    return held() && bytes >= threshold
        && release("new files of " + bytes + " bytes (at least " + threshold + ")");
  }

  /** C2 released when a Kafka backlog of {@code records} reaches the session's {@code spark.sluice.jit.fullRecords}. */
  public static boolean releaseForRecords(org.apache.spark.sql.SparkSession spark, long records) {
    long threshold = Long.parseLong(spark.conf().get("spark.sluice.jit.fullRecords", String.valueOf(FULL_RECORDS)));
    return held() && records >= threshold
        && release("a Kafka backlog of " + records + " records (at least " + threshold + ")");
  }

  /**
   * {@code {"optimizing_compiler", "released_because"}} as JSON text: held, released (started held), on (the JVM's
   * default) or off (quick: the first tier only).
   */
  public static synchronized String report() {
    ObjectNode out = JSON.createObjectNode();
    out.put("optimizing_compiler", STARTED_HELD ? (released ? "released" : "held") : QUICK ? "off" : "on");
    out.put("released_because", because);
    return out.toString();
  }
}
