"""Reads a Parquet export of Blackbox as users do, with pyarrow and pandas, and prints
what it found as one JSON object: the column types each library gives, the rows (times
as integer nanoseconds, payloads, values) and the row groups' statistics.

    python parquet_read.py EVENTS.parquet [SUMMARIES.parquet]
"""

import json
import math
import sys

import pandas as pd
import pyarrow.parquet as pq


def ns(series):
    """A timestamp column as integer nanoseconds (None for a null)."""
    out = []
    for v in series:
        out.append(None if pd.isna(v) else int(v.value))
    return out


def num(v):
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return None
    return v


def read(path):
    table = pq.read_table(path)
    df = pd.read_parquet(path)
    meta = pq.ParquetFile(path).metadata
    stats = {}
    for g in range(meta.num_row_groups):
        group = meta.row_group(g)
        for c in range(group.num_columns):
            col = group.column(c)
            s = col.statistics
            if s is not None and s.has_min_max:
                stats.setdefault(col.path_in_schema, []).append([str(s.min), str(s.max)])
    return table, df, meta, stats


def main():
    table, df, meta, stats = read(sys.argv[1])
    out = {
        "rows": table.num_rows,
        "row_groups": meta.num_row_groups,
        "arrow_types": {f.name: str(f.type) for f in table.schema},
        "pandas_dtypes": {c: str(t) for c, t in df.dtypes.items()},
        "statistics": stats,
    }
    times = {c: ns(df[c]) for c in ("ts", "written", "event_time")}
    value_cols = [c for c in df.columns if c.startswith("value_")]
    events = []
    for i in range(len(df)):
        raw = df["payload_raw"].iloc[i]
        events.append(
            {
                "seq": int(df["seq"].iloc[i]),
                "kind": None if "kind" not in df else str(df["kind"].iloc[i]),
                "source": None if pd.isna(df["source"].iloc[i]) else str(df["source"].iloc[i]),
                "tier": str(df["tier"].iloc[i]),
                "weight": float(df["weight"].iloc[i]),
                "ts_ns": times["ts"][i],
                "written_ns": times["written"][i],
                "event_time_ns": times["event_time"][i],
                "payload_json": None if pd.isna(df["payload_json"].iloc[i]) else str(df["payload_json"].iloc[i]),
                "payload_raw": None if raw is None else bytes(raw).hex(),
                "hash": bytes(df["hash"].iloc[i]).hex(),
                "values": {
                    c[len("value_"):]: num(float(df[c].iloc[i]))
                    for c in value_cols
                    if num(float(df[c].iloc[i])) is not None
                },
            }
        )
    out["events"] = events
    if len(sys.argv) > 2:
        table, df, meta, stats = read(sys.argv[2])
        out["summaries_arrow_types"] = {f.name: str(f.type) for f in table.schema}
        names = sorted({c[len("min_"):] for c in df.columns if c.startswith("min_")})
        starts, ends = ns(df["window_start"]), ns(df["window_end"])
        summaries = []
        for i in range(len(df)):
            values = {}
            for n in names:
                if pd.isna(df["count_" + n].iloc[i]):
                    continue
                values[n] = {
                    s: num(float(df[s + "_" + n].iloc[i]))
                    for s in ("min", "max", "mean", "sum", "last")
                }
                values[n]["count"] = int(df["count_" + n].iloc[i])
            summaries.append(
                {
                    "seq": int(df["seq"].iloc[i]),
                    "kind": str(df["kind"].iloc[i]),
                    "window_start_ns": starts[i],
                    "window_end_ns": ends[i],
                    "count": int(df["count"].iloc[i]),
                    "values": values,
                }
            )
        out["summaries"] = summaries
    json.dump(out, sys.stdout)


main()
