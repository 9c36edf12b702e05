"""The pairwise judge against the real embedded llama.cpp server: structured verdicts, cache replay."""
from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from evekit.runs import win_rate as wr
from evekit.judges import JudgePanel

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "win_rate"
pytestmark = pytest.mark.integration


def test_pairwise_judging_with_the_embedded_model_records_and_replays(embedded_server, tmp_path):
    comp = wr.match_files(wr.ModelSpec("0shot", str(FIXTURES / "open_ended_0shot.csv")),
                          wr.ModelSpec("5shot", str(FIXTURES / "open_ended_5shot.csv")), limit=3)
    judges = [{"name": "smollm2", "model": "smollm2-135m-instruct", "base_url": embedded_server}]
    panel = JudgePanel(judges, "pairwise", cache_dir=tmp_path, max_retries=1, max_tokens=128, progress=False)
    try:
        wr.judge_comparison(comp, panel, seed=0)
    finally:
        panel.close()
    res = comp.results
    assert len(res) == 3
    # every decision is a verdict or a failure with its reason, never silently a tie
    for r in res.itertuples():
        assert (r.judge_said in ("A", "B", "tie") and r.error is None) or (r.judge_said is None and r.error)
    s = comp.summary.set_index("judge").loc["smollm2"]
    assert s["n"] + s["failed"] == 3
    assert panel.usage_by_judge()["smollm2"]["requests"] >= 3

    again = wr.match_files(wr.ModelSpec("0shot", str(FIXTURES / "open_ended_0shot.csv")),
                           wr.ModelSpec("5shot", str(FIXTURES / "open_ended_5shot.csv")), limit=3)
    replay = JudgePanel(judges, "pairwise", cache_dir=tmp_path, offline=True, max_tokens=128, progress=False)
    try:
        wr.judge_comparison(again, replay, seed=0)
    finally:
        replay.close()
    pd.testing.assert_frame_equal(again.results, res)
