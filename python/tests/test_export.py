"""`blackbox.export`: the events a test recorded, read back from the file by the tools
a user reads it with (pyarrow, the `mcap` reader, json), and the manifest checked by
the command (`blackbox export --check --dir`)."""

import datetime
import json

import blackbox
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest
from mcap.reader import make_reader

from conftest import run


def write_log(log_dir):
    """Records a known mix of kinds; returns [(kind, payload, values)] in order."""
    sent = []
    with blackbox.Recorder(log_dir, policy={"default": "full"}) as rec:
        for i in range(50):
            kind = ("tool.call", "tool.result", "sensor.imu")[i % 3]
            payload = {"i": i, "tool": "search"} if kind != "sensor.imu" else None
            values = {"ax": i * 0.5} if kind == "sensor.imu" else None
            rec.record(kind, payload, values=values)
            sent.append((kind, payload, values))
    return sent


def test_parquet_holds_the_events_recorded_and_the_command_checks_it(log_dir, tmp_path, command):
    sent = write_log(log_dir)
    out = tmp_path / "events.parquet"
    manifest = blackbox.export(log_dir, out)
    assert manifest["rows"] == len(sent)
    table = pq.read_table(out)
    assert table.num_rows == len(sent)
    rows = table.to_pylist()
    for row, (kind, payload, values) in zip(rows, sent):
        assert row["kind"] == kind
        assert row["weight"] == 1.0
        if payload is None:
            assert row["payload_json"] is None
        else:
            assert json.loads(row["payload_json"]) == payload
        if values:
            assert row["value_ax"] == values["ax"]
    # The manifest beside the file is the one the command writes and checks.
    on_disk = json.loads((tmp_path / "events.parquet.manifest.json").read_text())
    assert on_disk["rows"] == len(sent)
    assert on_disk["log"]["digest"] == manifest["log"]["digest"] is not None
    run(command, "export", "--check", out, "--dir", log_dir)


def test_a_query_narrows_the_export_as_it_narrows_replay(log_dir, tmp_path):
    sent = write_log(log_dir)
    out = tmp_path / "tools.jsonl"
    manifest = blackbox.export(log_dir, out, format="jsonl", kind="tool.*")
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    wanted = [(k, p) for k, p, _ in sent if k.startswith("tool.")]
    assert [(r["kind"], r["payload"]) for r in lines] == wanted
    assert manifest["rows"] == len(wanted)


def test_partitioned_parquet_reads_as_one_dataset(log_dir, tmp_path):
    sent = write_log(log_dir)
    out = tmp_path / "by_kind"
    blackbox.export(log_dir, out, partition="kind")
    table = ds.dataset(out, format="parquet", partitioning="hive").to_table()
    counts = {}
    for kind in table.column("kind").to_pylist():
        counts[kind] = counts.get(kind, 0) + 1
    expected = {}
    for kind, _, _ in sent:
        expected[kind] = expected.get(kind, 0) + 1
    assert counts == expected


def test_partitioned_by_date_and_kind_puts_each_event_under_its_utc_date(log_dir, tmp_path):
    sent = write_log(log_dir)
    out = tmp_path / "by_day"
    blackbox.export(log_dir, out, partition="date,kind")
    table = ds.dataset(out, format="parquet", partitioning="hive").to_table()
    assert table.num_rows == len(sent)
    # The oracle for each row's date: its ts, as pyarrow reads it, in UTC.
    for ts, date, kind in zip(
        table.column("ts").to_pylist(),
        table.column("date").to_pylist(),
        table.column("kind").to_pylist(),
    ):
        assert str(date) == ts.astimezone(datetime.timezone.utc).date().isoformat(), (ts, date)
        assert (out / f"date={date}" / f"kind={kind}").is_dir()


def test_a_url_is_refused_with_the_command_that_takes_it(log_dir, tmp_path):
    write_log(log_dir)
    with pytest.raises(blackbox.InvalidInput, match="blackbox export --partition robot"):
        blackbox.export(log_dir, "s3://lake/events", partition="date,kind")


def test_mcap_has_a_channel_per_kind_with_every_event(log_dir, tmp_path):
    sent = write_log(log_dir)
    out = tmp_path / "run.mcap"
    blackbox.export(log_dir, out, format="mcap", compression="lz4")
    per_topic = {}
    with open(out, "rb") as f:
        for _schema, channel, _message in make_reader(f).iter_messages():
            per_topic[channel.topic] = per_topic.get(channel.topic, 0) + 1
    for kind in {k for k, _, _ in sent}:
        assert per_topic["/" + kind] == sum(1 for k, _, _ in sent if k == kind)


@pytest.mark.parametrize(
    "kwargs, words",
    [
        ({"format": "csv"}, 'format "csv" is not one of'),
        ({"format": "jsonl", "partition": "kind"}, "are Parquet options"),
        ({"partition": "hour"}, 'partition "hour" is not one'),
        ({"partition": "kind,kind"}, 'partition "kind,kind" is not one'),
        ({"partition": "robot"}, 'partition "robot" is not one'),
        ({"partition": "kind,date,kind"}, 'partition "kind,date,kind" is not one'),
        ({"compression": "lz4"}, "compression is an MCAP option"),
        ({"format": "jsonl", "compression": "zstd"}, "compression is an MCAP option"),
        ({"format": "mcap", "compression": "gzip"}, 'compression "gzip" is not one of'),
    ],
)
def test_options_that_do_not_fit_are_refused(log_dir, tmp_path, kwargs, words):
    write_log(log_dir)
    out = tmp_path / "out.file"
    with pytest.raises(blackbox.InvalidInput, match=words):
        blackbox.export(log_dir, out, **kwargs)
    assert not out.exists()


def test_a_summaries_file_over_the_export_and_an_output_inside_the_log_are_refused(log_dir, tmp_path):
    write_log(log_dir)
    out = tmp_path / "e.parquet"
    with pytest.raises(blackbox.BlackboxError, match="would overwrite the export"):
        blackbox.export(log_dir, out, summaries=tmp_path / "e.parquet.manifest.json")
    assert not out.exists()
    with pytest.raises(blackbox.InvalidInput, match="refusing to write"):
        blackbox.export(log_dir, log_dir / "inside.parquet")
    assert blackbox.verify(log_dir)["intact"] is True
