"""Reads a partitioned Parquet export of Blackbox (OUT/kind=KIND/part-N.parquet) as one
table with DuckDB, and prints per kind its rows and the sum of its weights, and the
column types DuckDB gives, as one JSON object.

    python parquet_duckdb.py OUT
"""

import json
import sys

import duckdb

root = sys.argv[1]
con = duckdb.connect()
source = f"read_parquet('{root}/*/*.parquet', hive_partitioning = true)"
kinds = {
    kind: {"rows": rows, "weight_sum": weight}
    for kind, rows, weight in con.execute(
        f"SELECT kind, count(*), sum(weight) FROM {source} GROUP BY kind ORDER BY kind"
    ).fetchall()
}
types = {row[0]: str(row[1]) for row in con.execute(f"DESCRIBE SELECT * FROM {source}").fetchall()}
json.dump({"kinds": kinds, "types": types}, sys.stdout)
