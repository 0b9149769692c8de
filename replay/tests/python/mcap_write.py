"""Writes an MCAP file with the Python `mcap` writer, as a recording made elsewhere
would be: JSON messages on two topics, raw (non-JSON) messages on a third, with
schemas, and prints what it wrote as one JSON object a line (the test's oracle):
{"topic", "log_time", "publish_time", "encoding", "schema", "data"} with `data` the
message's bytes as text (JSON) or hex (other encodings).

usage: mcap_write.py OUT.mcap START_NS COMPRESSION(zstd|lz4|none)
"""

import json
import sys

from mcap.writer import CompressionType, Writer

out, start_ns, compression = sys.argv[1], int(sys.argv[2]), sys.argv[3]
kind = {
    "zstd": CompressionType.ZSTD,
    "lz4": CompressionType.LZ4,
    "none": CompressionType.NONE,
}[compression]

with open(out, "wb") as f:
    w = Writer(f, compression=kind, chunk_size=4096)
    w.start(profile="", library="test")
    pose_schema = w.register_schema(
        name="demo.Pose",
        encoding="jsonschema",
        data=json.dumps({"type": "object"}).encode(),
    )
    imu_schema = w.register_schema(
        name="sensor_msgs/msg/Imu", encoding="ros2msg", data=b"float64 ax\n"
    )
    pose = w.register_channel(topic="/robot/pose", message_encoding="json", schema_id=pose_schema)
    status = w.register_channel(topic="/robot/status", message_encoding="json", schema_id=0)
    imu = w.register_channel(topic="/imu/raw", message_encoding="cdr", schema_id=imu_schema)
    rows = []
    for i in range(300):
        t = start_ns + i * 10_000_000  # 100 Hz
        p = {"x": i * 0.5, "y": -1.25 * i, "frame": "map", "nested": {"z": i}}
        data = json.dumps(p).encode()
        w.add_message(channel_id=pose, log_time=t, publish_time=t + 1000, data=data, sequence=i)
        rows.append({"topic": "/robot/pose", "log_time": t, "publish_time": t + 1000,
                     "encoding": "json", "schema": "demo.Pose", "data": data.decode()})
        raw = bytes([i % 256, 0, 255, (i * 7) % 256]) + b"\x00\x01"
        w.add_message(channel_id=imu, log_time=t + 5, publish_time=t + 5, data=raw, sequence=i)
        rows.append({"topic": "/imu/raw", "log_time": t + 5, "publish_time": t + 5,
                     "encoding": "cdr", "schema": "sensor_msgs/msg/Imu", "data": raw.hex()})
        if i % 50 == 0:
            s = {"state": "ok" if i < 200 else "fault", "battery": 100 - i / 10}
            data = json.dumps(s).encode()
            w.add_message(channel_id=status, log_time=t + 7, publish_time=t + 7, data=data)
            rows.append({"topic": "/robot/status", "log_time": t + 7, "publish_time": t + 7,
                         "encoding": "json", "schema": None, "data": data.decode()})
    w.finish()

for r in rows:
    print(json.dumps(r))
