"""The Airflow glue: the operators that DAG files declare, Airflow standalone for this
repository, and what the Tandem page shows of a query."""
