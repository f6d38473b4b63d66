"""K-slack disorder handling driven by the result quality a user states (Ji, chapters 3–5).

The models that size a K-slack buffer: how late a stream's tuples arrive (``delays``) and the
recent delays the statistics keep (``statistics``), what share of a window a buffer of K seconds
lets in and what share a result needs (``coverage``), the share measured at run time
(``measured``), and the two ways of choosing K each adaptation interval (``adaptation``). Pure
functions and state over NumPy arrays: no Spark, no DuckDB.
"""
