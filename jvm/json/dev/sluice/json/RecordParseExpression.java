package dev.sluice.json;

import java.io.Serializable;
import java.util.Objects;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.codegen.CodeBlock;
import org.apache.spark.sql.catalyst.expressions.codegen.CodegenContext;
import org.apache.spark.sql.catalyst.expressions.codegen.ExprCode;
import org.apache.spark.sql.catalyst.expressions.codegen.JavaCode;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * {@link RecordParse} as a Catalyst expression: the record's text in, Spark's own internal row out. A UDF's
 * answer goes through Java's types and back (each string decoded and encoded again, each time an
 * {@code Instant}, each number boxed): this hands Spark the parser's internal row as it is.
 *
 * <p>Code-generated as a call of {@link #parse} on this object, so the projection it sits in stays in its stage's
 * generated code. Not deterministic, as the UDF before it: Spark evaluates it once per record, neither copying it
 * into each column that reads its result nor pushing a filter on those columns below it.
 */
public final class RecordParseExpression extends Expression implements Serializable {
  private static final long serialVersionUID = 1L;
  private final Expression child;
  private final String configText;
  private final StructType returned;
  private final scala.collection.immutable.Seq<Expression> children;  // Spark asks for them on every walk of a plan
  /** The configuration of the thread that last parsed with this object (a task's copy: one thread). */
  private transient volatile Held held;

  /** A thread and its configuration, read and replaced as one reference. */
  private record Held(Thread thread, RecordParse.Config config) {}

  public RecordParseExpression(Expression child, String configText, StructType returned) {
    this.child = child;
    this.configText = configText;
    this.returned = returned;
    this.children = scala.collection.immutable.List$.MODULE$.<Expression>empty().$colon$colon(child);
  }

  /** The answer for one record's text (not null): see {@link RecordParse#parse}. */
  public InternalRow parse(UTF8String text) {
    Thread thread = Thread.currentThread();
    Held mine = held;
    if (mine == null || mine.thread != thread) {  // not a thread-local lookup for every record
      mine = new Held(thread, RecordParse.config(configText, (StructType) returned.apply("value").dataType()));
      held = mine;
    }
    return RecordParse.parse(mine.config, text);
  }

  @Override
  public scala.collection.immutable.Seq<Expression> children() {
    return children;
  }

  @Override
  public Expression withNewChildrenInternal(scala.collection.immutable.IndexedSeq<Expression> children) {
    return new RecordParseExpression(children.apply(0), configText, returned);
  }

  @Override
  public boolean nullable() {
    return child.nullable();
  }

  @Override
  public Object eval(InternalRow input) {
    Object text = child.eval(input);
    return text == null ? null : parse((UTF8String) text);
  }

  @Override
  public DataType dataType() {
    return returned;
  }

  @Override
  public boolean deterministic() {
    return false;
  }

  @Override
  public ExprCode doGenCode(CodegenContext ctx, ExprCode ev) {
    String self = ctx.addReferenceObj("sluiceRecordParse", this, RecordParseExpression.class.getName());
    ExprCode text = child.genCode(ctx);
    String code = text.code() + "\n"
        + "boolean " + ev.isNull() + " = " + text.isNull() + ";\n"
        + "InternalRow " + ev.value() + " = null;\n"
        + "if (!" + ev.isNull() + ") {\n"
        + "  " + ev.value() + " = " + self + ".parse(" + text.value() + ");\n"
        + "}";
    scala.collection.immutable.Seq<String> parts = scala.collection.immutable.List$.MODULE$.<String>empty().$colon$colon(code);
    return ev.copy(new CodeBlock(parts, scala.collection.immutable.List$.MODULE$.<JavaCode>empty()), ev.isNull(), ev.value());
  }

  @Override
  public String prettyName() {
    return "sluice_record_parse";
  }

  @Override
  public String toString() {
    return prettyName() + "(" + child + ")";
  }

  @Override
  public int productArity() {
    return 3;
  }

  @Override
  public Object productElement(int n) {
    return switch (n) {
      case 0 -> child;
      case 1 -> configText;
      case 2 -> returned;
      default -> throw new IndexOutOfBoundsException(n);
    };
  }

  @Override
  public boolean canEqual(Object other) {
    return other instanceof RecordParseExpression;
  }

  @Override
  public boolean equals(Object other) {
    return other instanceof RecordParseExpression that && child.equals(that.child)
        && configText.equals(that.configText);
  }

  @Override
  public int hashCode() {
    return Objects.hash(child, configText);
  }
}
