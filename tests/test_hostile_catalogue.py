"""The hostile catalogue (benchmarks/hostile_cases.py, issue 24's closing table) cannot silently rot:
a sample of its cases, one from every group, runs here against this checkout, each in its own process
as the benchmark runs it, and every outcome must be a clear error or fine."""
from __future__ import annotations

import importlib.util
import sys

import pytest

from evekit.paths import REPO_ROOT

spec = importlib.util.spec_from_file_location("hostile_cases", REPO_ROOT / "benchmarks" / "hostile_cases.py")
H = importlib.util.module_from_spec(spec)
sys.modules["hostile_cases"] = H
spec.loader.exec_module(H)

# One or more per group (parameter files, concurrent runs, datasets, letters, client replies,
# injections, pairwise, HTML, index and stale marks, pairing, files): the cheap ones of each.
SAMPLE = ["empty_file", "alias_bomb", "key_in_url_userinfo", "run_name_parent",
          "limit_negative", "key_in_judge_field", "one_choice", "duplicate_choices", "invalid_utf8_dataset",
          "fullwidth_B", "cyrillic_B", "tool_call_only", "huge_reply", "inj_issue_answer", "inj_fake_json",
          "inj_parrot_json", "judge_two_json_conflicting", "pair_inj_3", "html_table_script",
          "html_table_caption", "stale_failed_rerun", "all_calls_failed_index", "pair_rag_by_document",
          "pair_ambiguous", "enospc_on_replace"]


def test_the_catalogue_has_the_issues_size_and_every_case_a_class():
    assert len(H.CASES) >= 120
    assert len({c.id for c in H.CASES}) == len(H.CASES)
    assert all(c.probes in H.CLASSES for c in H.CASES)
    assert sum(c.origin == "own" for c in H.CASES) >= 30
    assert set(SAMPLE) <= {c.id for c in H.CASES}


@pytest.mark.parametrize("case_id", SAMPLE)
def test_sampled_case_is_acceptable_after(case_id):
    result = H.run_one_subprocess(case_id, str(REPO_ROOT), timeout=60)
    assert result["outcome"] in H.ACCEPTABLE, f"{case_id}: {result['outcome']}: {result['detail']}"


def test_the_classifier_can_say_bad():
    """The rules that sort outcomes do find a bad one (a table of only "fine" proves nothing)."""
    tags = H.markup_from_data("<td>x</td>", "<td><img src=x onerror=alert(1)></td>", "<img src=x onerror=alert(1)>")
    assert tags[0] == "escape"
    assert H.markup_from_data("<td>x</td>", "<td>&lt;b&gt;</td>", "<b>") == ("fine", "shown as text")
    assert H.classify_exception(KeyError("k"))[0] == "raw traceback"
    assert H.classify_exception(ValueError(f"bad {H.KEY}"))[0] == "secret written"
