"""Reads an MCAP file with the Python `mcap` reader (mcap.reader.make_reader, which
decompresses zstd and lz4 chunks and reads the summary section), and prints what it
holds as one JSON object:

{"channels": {topic: {"encoding", "schema", "schema_encoding", "schema_is_json",
  "metadata"}},
 "messages": {topic: [[log_time, publish_time, message parsed as JSON], ...]},
 "metadata": [{"name", "metadata"}],
 "statistics": {"message_count", "channel_message_counts": {topic: count}},
 "compressions": [the chunks' compressions]}

usage: mcap_read.py FILE.mcap
"""

import json
import sys

from mcap.reader import make_reader

with open(sys.argv[1], "rb") as f:
    reader = make_reader(f)
    summary = reader.get_summary()
    channels = {}
    for cid, c in summary.channels.items():
        schema = summary.schemas.get(c.schema_id)
        try:
            json.loads(schema.data)
            schema_is_json = True
        except Exception:
            schema_is_json = False
        channels[c.topic] = {
            "encoding": c.message_encoding,
            "schema": schema.name if schema else None,
            "schema_encoding": schema.encoding if schema else None,
            "schema_is_json": schema_is_json,
            "metadata": dict(c.metadata),
        }
    messages = {}
    for schema, channel, message in reader.iter_messages(log_time_order=False):
        messages.setdefault(channel.topic, []).append(
            [message.log_time, message.publish_time, json.loads(message.data)]
        )
    metadata = [{"name": m.name, "metadata": dict(m.metadata)} for m in reader.iter_metadata()]
    stats = summary.statistics
    counts = {summary.channels[cid].topic: n for cid, n in stats.channel_message_counts.items()}
    out = {
        "channels": channels,
        "messages": messages,
        "metadata": metadata,
        "statistics": {"message_count": stats.message_count, "channel_message_counts": counts},
        "compressions": sorted({ci.compression for ci in summary.chunk_indexes}),
    }
print(json.dumps(out))
