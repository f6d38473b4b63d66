"""Spark Structured Streaming runtime: sources, DSPS-ops, the MIG bridge to DuckDB, sinks and
checkpoints. It runs the physical plans the optimiser chooses (the execution issue)."""
