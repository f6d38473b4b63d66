"""Tandem: windowed SPJA continuous queries placed across Spark and DuckDB."""

__version__ = "0.1.0"
