"""DuckDB store: translation of DB-ops into DuckDB SQL (``fragment_sql``); window-state tables,
per-slide evaluation, purge and read-only inspection arrive with the execution issue."""
