"""The SQL the cache runs: statements built from a table, a key and the endpoint, and one transaction.

Every data table is keyed by its key columns and the Hub endpoint (see
:mod:`explorer.sources.cache.schema`), so every statement names the
endpoint last. Writing a record is a :func:`replace` (delete the key's row,
insert the new one) inside one :func:`transaction`, rolled back on error.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from explorer.errors import CacheError

#: a statement and its parameters
Statement = tuple[str, list]
#: a listing's files, one row each, from its columns (repo, sha, indexes, paths, sizes, LFS flags, endpoint)
FILES_INSERT = (
    "INSERT INTO files SELECT ?, ?, unnest(?::INTEGER[]), unnest(?::VARCHAR[]), unnest(?::BIGINT[]),"
    " unnest(?::BOOLEAN[]), ?"
)

__all__ = ["FILES_INSERT", "Statement", "delete", "replace", "select", "transaction"]


def _where(key: Mapping[str, object]) -> str:
    return " AND ".join(f"{column} = ?" for column in key) + " AND endpoint = ?"


def select(table: str, columns: str, key: Mapping[str, object], endpoint: str) -> Statement:
    """``SELECT columns FROM table`` for the key's row(s) of ``endpoint``."""
    return f"SELECT {columns} FROM {table} WHERE {_where(key)}", [*key.values(), endpoint]


def delete(table: str, key: Mapping[str, object], endpoint: str) -> Statement:
    """``DELETE`` the key's rows of ``endpoint``."""
    return f"DELETE FROM {table} WHERE {_where(key)}", [*key.values(), endpoint]


def replace(table: str, key: Mapping[str, object], row: Sequence[object], endpoint: str) -> list[Statement]:
    """Delete the key's row and insert ``row`` (all columns but the endpoint, in the table's order)."""
    marks = ", ".join("?" * (len(row) + 1))
    return [delete(table, key, endpoint), (f"INSERT INTO {table} VALUES ({marks})", [*row, endpoint])]


def transaction(con, what: str, path: str, statements: Sequence[Statement]) -> None:
    """Run ``statements`` in one transaction on ``con``, rolled back on any error (a DuckDB one: CacheError)."""
    import duckdb  # loaded already: the connection is open

    try:
        con.execute("BEGIN TRANSACTION")
        for sql, params in statements:
            con.execute(sql, params)
        con.execute("COMMIT")
    except BaseException as e:
        try:
            con.execute("ROLLBACK")
        except duckdb.Error:
            pass
        if isinstance(e, duckdb.Error):
            raise CacheError(f"cannot write {what} to the cache at {path}: {e}") from e
        raise


def entry_sizes() -> str:
    """Each cached entry (repo at a commit) of one endpoint (the parameter, four times): ``repo, sha, bytes,
    fetched_at``, the least recently fetched first; bytes counts the stored text (configs, headers, listings)."""
    return (
        "WITH sizes AS ("
        " SELECT repo, sha, length(text) AS n, fetched_at AS t FROM configs WHERE endpoint = ?"
        " UNION ALL SELECT repo, sha, length(metadata) + length(tensors), fetched_at FROM gguf_headers WHERE endpoint = ?"
        " UNION ALL SELECT repo, sha, 64 * file_count, fetched_at FROM repos WHERE endpoint = ?"
        " UNION ALL SELECT repo, sha, length(params_by_dtype) + length(files), fetched_at FROM safetensors"
        " WHERE endpoint = ?)"
        " SELECT repo, sha, sum(n), max(t) FROM sizes GROUP BY repo, sha ORDER BY max(t), repo, sha"
    )
