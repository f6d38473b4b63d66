"""The benchmark harness: calibration of the cost model's unit costs, capacity of a plan at a
rate, the rate search across placements and its report, verification against the independent
reference evaluator, and a local Spark standalone cluster for the scaling benchmark and the tests.
The scripts in bench/ and `tandem bench|calibrate|verify` use it."""
