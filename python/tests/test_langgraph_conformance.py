"""LangGraph's own checkpointer conformance suite (langgraph-checkpoint-conformance)
against blackbox.langgraph.BlackboxSaver: every base capability, and every extended one
the saver declares, passes."""

import contextlib
import io

import pytest
from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.conformance.capabilities import (
    BASE_CAPABILITIES,
    EXTENDED_CAPABILITIES,
)

from blackbox.langgraph import BlackboxSaver


@pytest.mark.asyncio
@pytest.mark.parametrize("cache_bytes", [64 << 20, 0], ids=["cached", "read-back"])
async def test_the_saver_passes_the_conformance_suite(tmp_path, cache_bytes):
    logs = iter(range(1_000))

    @checkpointer_test(name=f"BlackboxSaver(cache_bytes={cache_bytes})")
    async def saver():
        with BlackboxSaver.open(tmp_path / f"flight-{next(logs)}", cache_bytes=cache_bytes) as s:
            yield s

    report = await validate(saver)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        report.print_report()
    for cap in BASE_CAPABILITIES:
        result = report.results[cap.value]
        assert result.detected and result.passed, f"{cap.value}:\n{printed.getvalue()}"
    # The saver declares every extended capability the suite knows.
    for cap in EXTENDED_CAPABILITIES:
        result = report.results[cap.value]
        assert result.detected and result.passed, f"{cap.value}:\n{printed.getvalue()}"
    assert report.passed_all(), printed.getvalue()
