"""Airflow operators: thin wrappers that call the library (optimise, run, micro-batch, validate,
clean up). They arrive with the Airflow issue; DAG files in dags/ only declare."""
