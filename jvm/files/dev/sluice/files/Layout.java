package dev.sluice.files;

import java.io.IOException;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import org.apache.hadoop.conf.Configuration;
import org.apache.spark.sql.classic.SparkSession;
import org.apache.spark.sql.execution.datasources.DataSource;
import org.apache.spark.sql.execution.datasources.FileFormat;
import org.apache.spark.sql.execution.datasources.HadoopFsRelation;
import org.apache.spark.sql.execution.datasources.InMemoryFileIndex;
import org.apache.spark.sql.sources.BaseRelation;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;
import scala.Option;
import scala.jdk.javaapi.CollectionConverters;

/** What the reader of a source folder is: its format, options, schema and partition columns. */
final class Layout {
  static final String FORMAT = "sluice.format";
  /** Options of Spark's file source that this source does not honour: refused, never ignored. */
  static final Set<String> REFUSED = Set.of("latestfirst", "filenameonly", "cleansource", "sourcearchivedir",
      "modifiedbefore", "modifiedafter", "maxbytespertrigger");
  /** Options of Spark's file source that describe its discovery, which this source does itself. */
  static final Set<String> DISCOVERY = Set.of("maxfilespertrigger", "maxfileage", "maxcachedfiles",
      "discardcachedinputratio", "path", FORMAT, Listing.OPTION);

  final String path;
  final String format;
  final scala.collection.immutable.Map<String, String> innerOptions;
  final StructType schema;
  final scala.collection.immutable.Seq<String> partitionColumns;
  final int maxFiles;
  final String pathGlobFilter;
  /** Which names a listing reads ({@code sluice.listing}: {@link Listing}). */
  final Listing listing;
  /** Whether a file was there when the stream was analysed: its partition columns are then the stream's. */
  private final boolean sampled;
  private FileFormat fileFormat;

  private Layout(String path, String format, Map<String, String> inner, StructType schema, List<String> partitions,
      int maxFiles, String pathGlobFilter, Listing listing, boolean sampled) {
    this.path = path;
    this.format = format;
    this.innerOptions = toScala(inner);
    this.schema = schema;
    this.partitionColumns = CollectionConverters.asScala(partitions).toList();
    this.maxFiles = maxFiles;
    this.pathGlobFilter = pathGlobFilter;
    this.listing = listing;
    this.sampled = sampled;
  }

  static Layout of(SparkSession spark, Option<StructType> userSchema,
      scala.collection.immutable.Map<String, String> parameters) {
    Map<String, String> options = new LinkedHashMap<>();
    for (Map.Entry<String, String> e : CollectionConverters.asJava(parameters).entrySet()) {
      options.put(e.getKey().toLowerCase(Locale.ROOT), e.getValue());
    }
    String path = options.get("path");
    if (path == null || path.isEmpty()) {
      throw new IllegalArgumentException("sluice's file source needs a path: load(<folder>)");
    }
    String format = options.getOrDefault(FORMAT, "");
    if (format.isEmpty()) {
      throw new IllegalArgumentException("sluice's file source needs option " + FORMAT
          + " (json, csv, parquet, text, ...)");
    }
    for (String key : options.keySet()) {
      if (REFUSED.contains(key)) {
        throw new IllegalArgumentException("option " + key + " of Spark's file source is not supported by "
            + "sluice's discovery (source.discovery: index): remove it, or set source.discovery: spark");
      }
    }
    int maxFiles = 0;
    if (options.containsKey("maxfilespertrigger")) {
      maxFiles = Integer.parseInt(options.get("maxfilespertrigger").trim());
      if (maxFiles <= 0) {
        throw new IllegalArgumentException("maxFilesPerTrigger must be positive: " + maxFiles);
      }
    }
    Map<String, String> inner = new LinkedHashMap<>();
    for (Map.Entry<String, String> e : CollectionConverters.asJava(parameters).entrySet()) {
      if (!DISCOVERY.contains(e.getKey().toLowerCase(Locale.ROOT))) {
        inner.put(e.getKey(), e.getValue());
      }
    }
    boolean glob = org.apache.spark.deploy.SparkHadoopUtil.get().isGlobPath(new org.apache.hadoop.fs.Path(path));
    if (!glob && !options.containsKey("basepath")) {
      inner.put("basePath", path); // partition folders below the path (dt=2026-11-01) are columns
    }
    inner.put("__globPaths__", "false"); // DataSource.GLOB_PATHS_KEY: the listed files are read as named
    StructType user;
    if (userSchema.isDefined()) {
      user = userSchema.get();
    } else if ("text".equals(format)) {
      user = new StructType().add("value", DataTypes.StringType);
    } else {
      throw new IllegalArgumentException("sluice's file source needs a schema for format " + format);
    }
    String filter = options.get("pathglobfilter");
    Listing listing = Listing.parse(options.get(Listing.OPTION));
    if (listing.incremental && org.apache.spark.deploy.SparkHadoopUtil.get().isGlobPath(
        new org.apache.hadoop.fs.Path(path))) {
      throw new IllegalArgumentException(Listing.globRefused(path));
    }
    Configuration conf = spark.sessionState().newHadoopConf();
    String sample;
    try {
      sample = new Lister(path, conf, filter).anyFile();
    } catch (IOException e) {
      throw new IllegalStateException("cannot list " + path + ": " + e, e);
    }
    StructType schema = user;
    List<String> partitions = new ArrayList<>();
    if (sample != null) { // the columns a read of this file gets: the declared ones and its partition folders
      HadoopFsRelation relation = (HadoopFsRelation) relation(spark, format, List.of(sample), user, List.of(),
          toScala(inner));
      schema = relation.schema();
      for (String name : relation.partitionSchema().fieldNames()) {
        partitions.add(name);
      }
    }
    return new Layout(path, format, inner, schema, partitions, maxFiles, filter, listing, sample != null);
  }

  /** A batch relation of exactly these files (paths as Spark's log writes them). */
  static BaseRelation relation(SparkSession spark, String format, List<String> files, StructType schema,
      List<String> partitions, scala.collection.immutable.Map<String, String> options) {
    List<String> paths = new ArrayList<>(files.size());
    for (String f : files) {
      paths.add(org.apache.spark.paths.SparkPath.fromUrlString(f).toPath().toString());
    }
    DataSource source = new DataSource(spark, format, CollectionConverters.asScala(paths).toList(),
        Option.apply(schema), CollectionConverters.asScala(partitions).toList(), Option.empty(), options,
        Option.empty(), Option.empty());
    return source.resolveRelation(false, true, source.resolveRelation$default$3());
  }

  /**
   * A batch's relation, as Spark's file source makes it, but over the statuses the listing found: files whose
   * size the index knows are not looked at again (a file read from a log of Spark's file source is). The
   * files are asked for when a plan first needs them ({@link LazyFileIndex}), when the stream's partition
   * columns are known; else at once, to find them.
   */
  BaseRelation relation(SparkSession spark, java.util.function.Supplier<List<FileEntry>> files, String describe) {
    scala.collection.immutable.Map<String, String> options = caseInsensitive();
    if (!sampled) {
      InMemoryFileIndex index = fileIndex(spark, files.get(), options);
      return relation(spark, index, index.partitionSchema(), options);
    }
    StructType partitionSchema = new StructType();
    for (String name : CollectionConverters.asJava(partitionColumns)) {
      partitionSchema = partitionSchema.add(schema.apply(name));
    }
    partitionSchema = partitionSchema.asNullable();
    return relation(spark, new LazyFileIndex(() -> fileIndex(spark, files.get(), options), partitionSchema, describe),
        partitionSchema, options);
  }

  private scala.collection.immutable.Map<String, String> caseInsensitive() {
    return org.apache.spark.sql.catalyst.util.CaseInsensitiveMap$.MODULE$.apply(innerOptions);
  }

  private InMemoryFileIndex fileIndex(SparkSession spark, List<FileEntry> files,
      scala.collection.immutable.Map<String, String> options) {
    KnownFiles known = new KnownFiles();
    List<org.apache.hadoop.fs.Path> paths = new ArrayList<>(files.size());
    for (FileEntry e : files) {
      org.apache.hadoop.fs.Path p = org.apache.spark.paths.SparkPath.fromUrlString(e.path).toPath();
      paths.add(p);
      if (e.size >= 0) {
        known.add(p, e.size, e.mtime);
      }
    }
    return new InMemoryFileIndex(spark, CollectionConverters.asScala(paths).toList(), options, Option.apply(schema),
        known, Option.empty(), Option.empty());
  }

  private BaseRelation relation(SparkSession spark, org.apache.spark.sql.execution.datasources.FileIndex index,
      StructType partitionSchema, scala.collection.immutable.Map<String, String> options) {
    Set<String> partitionNames = new java.util.HashSet<>();
    for (String name : partitionSchema.fieldNames()) {
      partitionNames.add(name.toLowerCase(Locale.ROOT));
    }
    StructType dataSchema = new StructType();
    for (org.apache.spark.sql.types.StructField f : schema.fields()) {
      if (!partitionNames.contains(f.name().toLowerCase(Locale.ROOT))) {
        dataSchema = dataSchema.add(f);
      }
    }
    if (fileFormat == null) {
      fileFormat = (FileFormat) new DataSource(spark, format, CollectionConverters.asScala(List.<String>of()).toList(),
          Option.empty(), CollectionConverters.asScala(List.<String>of()).toList(), Option.empty(), options,
          Option.empty(), Option.empty()).providingInstance();
    }
    return new HadoopFsRelation(index, partitionSchema, dataSchema.asNullable(), Option.empty(), fileFormat, options,
        spark);
  }

  private static scala.collection.immutable.Map<String, String> toScala(Map<String, String> m) {
    return scala.collection.immutable.Map$.MODULE$.from(CollectionConverters.asScala(m));
  }
}
