"""Win-rate analysis: LLM judges compare two models' answers to the same questions, pair by pair.

This reproduces EVE's win-rate evaluation (`win_rate`, `alpaca_win_rate`, their differences,
`judge_agreement`, `position_bias`; per judge and averaged across judges) and adds what a reader
needs to trust a head-to-head claim: a majority-vote aggregate, a 95% interval for every rate
(resampling questions, never decisions), an exact
sign test, a length-bias check and, optionally, judging every pair in both orders (MT-Bench
practice: an order-dependent verdict counts as a tie).

The notebook drives a `WinRateRun` (see `evekit.runs.win_rate.run`). One module per concern:

- `params`: parameters (`WinRateParams`); `kind`: its registry entry.
- `matching`: reading answer CSVs and pairing rows by question (`read_answers`, `match_files`).
- `judging`: positions and pairwise decisions, through an `evekit.judges.JudgePanel` of the
  "pairwise" kind (`judge_comparison`, `run_judges`).
- `analysis`: statistics after judging (`win_rates`, `sign_test`, `summarize`, `eve_metrics`:
  EVE's numbers under EVE's names, evekit's under `evekit/`).
- `views`: tables, plots and the saved files (`summary_view`, `plot_*`, `save_outputs`).

Names are imported on first use (`evekit.lazy`): the batch runner reads `KIND` without the runner.
"""
from evekit.lazy import lazy_names

__getattr__, __dir__, __all__ = lazy_names(__name__, {
    "analysis": ("CI_COLUMNS", "SUMMARY_COLUMNS", "agreement_matrix", "eve_metrics", "evekit_metrics", "judge_agreement",
                 "question_interval", "sign_test", "summarize", "win_rates"),
    "kind": ("KIND",),
    "params": ("ALPHA", "TASKS", "WinRateConfig", "WinRateParams", "validate_params"),
    "judging": ("RESULT_COLUMNS", "a_shown_first", "judge_comparison", "judge_outcomes", "run_judges"),
    "matching": ("REQUIRED_COLUMNS", "Comparison", "ModelSpec", "load_comparisons", "match_files", "normalize_ws",
                 "read_answers", "unwrap_response"),
    "run": ("WinRateRun",),
    "views": ("matching_table", "plot_agreement", "plot_comparison", "plot_position_bias", "sample_rationales",
              "save_outputs", "setup_table", "summary_table", "summary_view", "unmatched_table", "verdict_text"),
})
