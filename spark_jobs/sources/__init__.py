"""Sources: a spec's ``source:`` as a streaming DataFrame (files, Kafka, Delta), schema inference, rewritten and cleaned-up landing files."""
