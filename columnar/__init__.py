"""DuckDB store: translation of DB-ops into DuckDB SQL (``fragment_sql``), and the window
state, evaluation, purge and idempotent results of DB-ops (``store``)."""
