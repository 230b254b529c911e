package dev.sluice.files;

import java.io.Serializable;
import org.apache.hadoop.fs.Path;
import org.apache.spark.paths.SparkPath;
import org.apache.spark.rdd.InputFileBlockHolder;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.codegen.CodeBlock;
import org.apache.spark.sql.catalyst.expressions.codegen.CodegenContext;
import org.apache.spark.sql.catalyst.expressions.codegen.ExprCode;
import org.apache.spark.sql.catalyst.expressions.codegen.JavaCode;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * The path of the file the current row was read from, as the file source's {@code _metadata.file_path} gives it,
 * computed only where it is asked for: a bad record's origin (spark_jobs/sources/files.py).
 *
 * <p>Reading {@code _metadata.file_path} makes the file scan copy every row into a new one that holds the file's
 * metadata, whether or not a row ever uses it; most records are good, and their origin is never read. This reads
 * the file the scan is in ({@link InputFileBlockHolder}, which the scan sets for every file, as
 * {@code input_file_name()} reads it) and writes it as {@code _metadata.file_path} does ({@code FileFormat}'s
 * extractor: the file's Hadoop path read back through {@code new Path(...)}, as a URI): {@code file:/a/b%20c.json}
 * where {@code input_file_name()} gives {@code file:///a/b%20c.json}. Null outside a file scan.
 *
 * <p>Evaluated in the projection right above the scan (where the scan's thread has set the file), so it is not
 * deterministic to Spark: the optimizer neither moves it nor folds it.
 */
public final class FilePathExpression extends Expression implements Serializable {
  private static final long serialVersionUID = 1L;
  /** The last file's path as the scan gave it, and as {@code _metadata.file_path} writes it. */
  private transient volatile String[] last;

  /** Registers the expression in the session as the function {@code name} of no argument. */
  public static void register(org.apache.spark.sql.classic.SparkSession spark, String name) {
    spark.sessionState().functionRegistry().createOrReplaceTempFunction(name,
        (scala.Function1<scala.collection.immutable.Seq<Expression>, Expression>) arguments -> {
          if (!arguments.isEmpty()) throw new IllegalArgumentException(name + " takes no argument");
          return new FilePathExpression();
        }, "scala_udf");
  }

  /** The path of the file being read, as {@code _metadata.file_path} gives it; null outside a file scan. */
  public UTF8String path() {
    UTF8String scanned = InputFileBlockHolder.getInputFilePath();
    if (scanned == null || scanned.numBytes() == 0) return null;  // the holder's empty string: no file
    String url = scanned.toString();
    String[] known = last;
    if (known == null || !known[0].equals(url)) {
      known = new String[] {url, new Path(SparkPath.fromUrlString(url).toPath().toString()).toUri().toString()};
      last = known;
    }
    return UTF8String.fromString(known[1]);
  }

  @Override
  public scala.collection.immutable.Seq<Expression> children() {
    return scala.collection.immutable.List$.MODULE$.empty();
  }

  @Override
  public Expression withNewChildrenInternal(scala.collection.immutable.IndexedSeq<Expression> children) {
    return new FilePathExpression();
  }

  @Override
  public boolean nullable() {
    return true;
  }

  @Override
  public Object eval(InternalRow input) {
    return path();
  }

  @Override
  public DataType dataType() {
    return DataTypes.StringType;
  }

  @Override
  public boolean deterministic() {
    return false;
  }

  @Override
  public ExprCode doGenCode(CodegenContext ctx, ExprCode ev) {
    String self = ctx.addReferenceObj("sluiceFilePath", this, FilePathExpression.class.getName());
    String code = "UTF8String " + ev.value() + " = " + self + ".path();\n"
        + "boolean " + ev.isNull() + " = " + ev.value() + " == null;";
    scala.collection.immutable.Seq<String> parts = scala.collection.immutable.List$.MODULE$.<String>empty().$colon$colon(code);
    return ev.copy(new CodeBlock(parts, scala.collection.immutable.List$.MODULE$.<JavaCode>empty()), ev.isNull(), ev.value());
  }

  @Override
  public String prettyName() {
    return "sluice_file_path";
  }

  @Override
  public String toString() {
    return prettyName() + "()";
  }

  @Override
  public int productArity() {
    return 0;
  }

  @Override
  public Object productElement(int n) {
    throw new IndexOutOfBoundsException(n);
  }

  @Override
  public boolean canEqual(Object other) {
    return other instanceof FilePathExpression;
  }

  @Override
  public boolean equals(Object other) {
    return other instanceof FilePathExpression;
  }

  @Override
  public int hashCode() {
    return FilePathExpression.class.hashCode();
  }
}
