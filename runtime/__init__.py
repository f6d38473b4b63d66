"""Running queries: explain (optimise and describe), run, live migration and adoption,
the scheduled micro-batch runs, the nightly clean-up, the landing and result validation, and the
settings they read. The CLI and the Airflow operators call these functions."""
