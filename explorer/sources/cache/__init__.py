"""EDGE: the DuckDB cache of Hub facts."""
