"""Queries a data lake of Blackbox exports in an S3 API server with DuckDB's own S3
support (the httpfs extension, installed from the duckdb-extension-httpfs wheel, not
from DuckDB's extension server), as one hive-partitioned table, and prints per robot,
date and kind its rows, the sum of its weights and its first and last seq, and the
names of the manifests under _manifests/, as one JSON object.

    python lake_duckdb.py ENDPOINT s3://BUCKET/PREFIX

The credentials and region are those of the environment (AWS_ACCESS_KEY_ID,
AWS_SECRET_ACCESS_KEY, AWS_REGION).
"""

import json
import os
import pathlib
import sys
import tempfile

import duckdb
import duckdb_extension_httpfs

endpoint, lake = sys.argv[1], sys.argv[2].rstrip("/")
extension = next(
    pathlib.Path(duckdb_extension_httpfs.__file__).parent.glob(
        "extensions/*/httpfs.duckdb_extension"
    )
)
with tempfile.TemporaryDirectory() as extensions:
    con = duckdb.connect(
        config={
            "extension_directory": extensions,
            "autoinstall_known_extensions": False,
            "autoload_known_extensions": False,
        }
    )
    con.install_extension(str(extension))
    con.load_extension("httpfs")
    host = endpoint.removeprefix("http://")
    con.execute(
        f"""CREATE SECRET lake (
            TYPE s3,
            KEY_ID '{os.environ["AWS_ACCESS_KEY_ID"]}',
            SECRET '{os.environ["AWS_SECRET_ACCESS_KEY"]}',
            REGION '{os.environ["AWS_REGION"]}',
            ENDPOINT '{host}',
            URL_STYLE 'path',
            USE_SSL false
        )"""
    )
    rows = con.execute(
        f"""SELECT robot, CAST(date AS VARCHAR), kind, count(*), sum(weight), min(seq), max(seq)
            FROM read_parquet('{lake}/**/*.parquet', hive_partitioning = true)
            GROUP BY ALL ORDER BY ALL"""
    ).fetchall()
    manifests = sorted(
        pathlib.PurePosixPath(f).name
        for (f,) in con.execute(f"SELECT file FROM glob('{lake}/_manifests/*')").fetchall()
    )
json.dump(
    {
        "groups": [
            {
                "robot": robot,
                "date": date,
                "kind": kind,
                "rows": n,
                "weight_sum": w,
                "first_seq": first,
                "last_seq": last,
            }
            for robot, date, kind, n, w, first, last in rows
        ],
        "manifests": manifests,
    },
    sys.stdout,
)
