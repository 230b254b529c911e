"""One micro-batch: the transform, then bad records, schema drift, expectations and the writes."""
