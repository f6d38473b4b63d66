"""Flink SQL, the benchmark's peer, gives the reference's rows (bench/peers/flink.py), each of
its formulations. It needs PyFlink in .venv-flink (`make peers`, about 850 MB), which `make
test` does not install: `make test-peers` installs it and runs these."""

from __future__ import annotations

import sys

import pytest

from tests.conftest import ROOT

sys.path.insert(0, str(ROOT / "bench" / "peers"))
import flink  # noqa: E402

pytestmark = [pytest.mark.integration, pytest.mark.peers, pytest.mark.skipif(
    not flink.PYTHON.exists(), reason="PyFlink is not installed: run `make peers`")]


@pytest.mark.parametrize("query", ["q1", "q1-expert", "q2-expert", "q3-expert", "q4-expert", "q5",
                                   "q6-expert"])
def test_flink_sql_gives_the_reference_rows(tmp_path, query):
    outcome = flink.exact(query, tmp_path / "flink.log")
    assert outcome["rows"] > 1000  # windows of every plug over 7 minutes
    assert outcome["exact"], outcome
