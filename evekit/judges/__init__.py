"""LLM judges: one panel for every judge kind, multi-judge voting and inter-judge agreement.

- `kinds`: the catalogue. A judge kind is data (prompt templates, JSON schema, prose parser,
  normalizer, reminder, reducer): the pointwise fact_check / context / refusal judges of EVE's
  open-ended tasks and the pairwise judge of the win rate.
- `prompts`: the cases (`JudgeCase`, `PairCase`) and how they are rendered into a judge's chat.
- `panel`: `JudgePanel(judges, kind, ...)`, the clients, structured verdicts through
  `evekit.structured.ask_json`, abstentions.
- `voting`: the reducers (`vote`, `majority_vote`) and the one definition of `judge_agreement`.
- `agreement`: kappas, agreement matrices and the run-level `judge_metrics` / `judge_counts`.

A judge that gives no usable verdict for a sample *abstains*: the reason is recorded and
counted, and the abstention is never turned into a FAIL, a PASS or a tie. A verdict given in the
reply's verdict field stands whatever its rationale quotes (`verdicts`); a rationale stating the
other side is a flag (judge_<name>_flag), and a judge abstaining on more than
`ABSTENTION_FLAG_SHARE` of its items is flagged in `judge_counts` / `judge_metrics`.
"""
from evekit.judges.agreement import (ABSTENTION_FLAG_SHARE, agreement_matrix, cohen_kappa, cohen_kappa_matrix,
                                     fleiss_kappa, judge_counts, judge_metrics, judge_names_in, judged_counts,
                                     pairwise_agreement)
from evekit.judges.kinds import (JUDGE_REMINDER, KINDS, PAIRWISE_REMINDER, PAIRWISE_SCHEMA, POINTWISE_KINDS,
                                 VERDICT_SCHEMA, JudgeKind, KindName, get_kind, load_prompt, normalize_verdict,
                                 parse_pairwise_text, parse_verdict_text)
from evekit.judges.panel import JudgePanel, flag_columns, judge_columns, validate_judges
from evekit.judges.prompts import (JudgeCase, PairCase, answers_shown, neutralise, read_prompt_file, render_pairwise,
                                   render_pointwise)
from evekit.judges.voting import abstained, add_vote_columns, judge_agreement, majority_vote, vote

__all__ = [
    "JudgePanel", "JudgeCase", "PairCase", "JudgeKind", "KindName", "KINDS", "POINTWISE_KINDS", "get_kind",
    "validate_judges", "judge_columns", "flag_columns", "answers_shown", "judged_counts", "ABSTENTION_FLAG_SHARE", "VERDICT_SCHEMA", "PAIRWISE_SCHEMA", "JUDGE_REMINDER", "PAIRWISE_REMINDER",
    "load_prompt", "read_prompt_file", "neutralise", "render_pointwise", "render_pairwise", "parse_verdict_text",
    "normalize_verdict", "parse_pairwise_text", "vote", "majority_vote", "judge_agreement", "add_vote_columns",
    "abstained", "agreement_matrix", "cohen_kappa", "cohen_kappa_matrix", "fleiss_kappa", "pairwise_agreement",
    "judge_metrics", "judge_counts", "judge_names_in",
]
