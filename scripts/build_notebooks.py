"""Write every notebook from one story per kind, so they stay alike and thin.

    python scripts/build_notebooks.py          # rewrites notebooks/<task>.ipynb without outputs
    python scripts/record_notebooks.py         # re-executes them for nbval (see that script)

Edit the story here, not in the .ipynb files. No parameters cell is written by hand: each is
generated from its kind's parameters (`evekit.runs.<kind>.params`: name, default, `help`; the
registry `evekit.runs.registry.KINDS` says which), with the demo values below as overrides.
"""
from __future__ import annotations

import sys
from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run as a script: evekit from this checkout

from evekit.paths import REPO_ROOT as ROOT  # noqa: E402
from evekit.runs.registry import KINDS  # noqa: E402
from evekit.tasks import TASKS as CATALOGUE  # noqa: E402

TASKS = {
    "mcqa_single_answer": dict(
        title="Multiple choice, one correct answer",
        about="Each question has one correct letter. Metrics: `acc` (exact letter match), and over the whole "
              "set `mcc` (Matthews correlation of answered and gold letters, -1 to 1, 0 = chance) and "
              "`macro_f1` (the mean of each letter's F1). An answer the model gave in an unusable form is "
              "scored wrong and listed as *unparsed*; for `mcc` and `macro_f1` it is a miss of the gold "
              "letter, not a letter of its own.",
        max_tokens=16, num_fewshot=2, limit=None),
    "mcqa_multiple_answer": dict(
        title="Multiple choice, one or more correct answers",
        about="The model names all correct letters, separated by a comma. Metrics: `IoU` (overlap of "
              "predicted and gold sets, partial credit) and `acc` (exact set match).",
        max_tokens=16, num_fewshot=2, limit=None),
    "open_ended": dict(
        title="Open-ended questions, judged by LLM judges",
        about="Free-form answers checked against a reference by strict EO fact-check judges (0 = FAIL, "
              "1 = PASS): any contradiction or a missing essential fact fails. With several judges: "
              "`llm_as_judge_<name>`, majority `judge_voting`, `llm_as_judge_avg`, `judge_agreement`, "
              "Fleiss' kappa. BLEU and ROUGE-L against the reference are shown for reference only.",
        max_tokens=96, num_fewshot=0, limit=12),
    "open_ended_w_context": dict(
        title="Open-ended questions answered from context documents (RAG)",
        about="Each question comes with one to three documents. The judges check the answer against "
              "the reference and the documents with the same strict rules.",
        max_tokens=96, num_fewshot=0, limit=12),
    "refusal": dict(
        title="Refusal when the context is insufficient",
        about="The context never holds the answer: the model should say so instead of inventing one. "
              "A refusal judge passes an answer that declines and fails one that answers anyway.",
        max_tokens=64, num_fewshot=0, limit=12),
    "hallucination_detection": dict(
        title="Hallucination detection",
        about="The model reads a question and an answer and says whether the answer contains "
              "hallucinated (false or unsupported) information: A = yes, B = no. Metrics: `acc`, "
              "`precision`, `recall`, `f1` with *hallucinated* as the positive class, and `mcc` "
              "(Matthews correlation, -1 to 1, 0 = chance) and `macro_f1` (the mean F1 of both labels). "
              "An unusable verdict is scored wrong: the opposite label for `precision`, `recall`, `f1` "
              "(as EVE), a miss of the gold label for `mcc` and `macro_f1` (as every one-label task).",
        max_tokens=8, num_fewshot=0, limit=None),
}

DEMO_JUDGES = [
    {"name": "smollm2-strict", "model": "smollm2-135m-instruct", "base_url": "http://127.0.0.1:8080/v1",
     "api_key_env": None, "max_tokens": 192, "reasoning_max_chars": 300},
    {"name": "smollm2-sampled", "model": "smollm2-135m-instruct", "base_url": "http://127.0.0.1:8080/v1",
     "api_key_env": None, "temperature": 0.7, "max_tokens": 192, "reasoning_max_chars": 300},
]

# Demo values every notebook starts from instead of RunConfig's defaults: the embedded model, replayed
# from the committed recording (every call is in it, so no network is needed; offline stays False, so
# a user who sets base_url gets the calls sent). Names, the other defaults and comments come from RunConfig.
DEMO = dict(model_name="smollm2-135m-instruct", base_url="http://127.0.0.1:8080/v1", concurrency=4,
            cache_dir="tests/fixtures/recorded_cache", run_name="recorded")
# The explorer's cell text (`evekit.explorer`), and the anchor the index's numbers link to.
EXPLORER_TEXT = ("## Explore every {unit}\nOne row per {unit}: sort by a column, search every text, and click a "
                 "row to open its whole story: {what}. In report.html the address `#explorer?outcome={example}` "
                 "opens it filtered.")
METRICS_ANCHOR = '<a id="metrics"></a>\n\n'
HEADER = ("# Parameters (papermill overrides these; see params/). Defaults replay a recorded run of the\n"
          "# embedded model from a committed cache (every call is in it); set base_url to call your model.")
COMMENT_COLUMN = 40  # where the comments start, as in the hand-written cells before


def parameters_cell(kind: str, values: dict, comments: dict | None = None, header: str = HEADER,
                    variant: str | None = None) -> str:
    """A notebook's parameters cell: one line per parameter of `kind` (and `variant`), its value from
    `values` else the parameter's default, its comment from `comments` else the parameter's help."""
    return KINDS[kind].params.parameters_cell(values, header=header, variant=variant, comments=comments,
                                              column=COMMENT_COLUMN)


def parameters_source(task: str, spec: dict) -> str:
    """A task notebook's parameters: the demo values, then the task's own from TASKS."""
    values = {**DEMO, "task": task, "dataset": f"data/{task}.jsonl", "max_tokens": spec["max_tokens"],
              "num_fewshot": spec["num_fewshot"], "limit": spec["limit"],
              "judges": DEMO_JUDGES if CATALOGUE[task].judge_kind else []}
    return parameters_cell("task", values, {"dataset": f'a local file or a hub id such as "{CATALOGUE[task].hub_id}"'},
                           variant=task)




def code(src: str, *tags: str):
    cell = new_code_cell(src)
    if tags:
        cell.metadata["tags"] = list(tags)
    return cell


def notebook(cells: list) -> nbformat.NotebookNode:
    """A notebook of `cells` for the python3 kernel."""
    nb = new_notebook(cells=cells)
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.metadata["language_info"] = {"name": "python"}
    return nb


def build(task: str, spec: dict, *, intro: str | None = None, params: str | None = None,
          judged: bool | None = None) -> nbformat.NotebookNode:
    """A task notebook; `judged` (default: the catalogue's judge kind) adds the judge cells."""
    judged = CATALOGUE[task].judge_kind is not None if judged is None else judged
    cells = [
        new_markdown_cell(intro or (
                          f"# {spec['title']} (`{task}`)\n\n{spec['about']}\n\n"
                          "Run it top to bottom in JupyterLab, or in batch: "
                          f"`papermill notebooks/{task}.ipynb out.ipynb -f params/demo/{task}.yaml`. "
                          "Every metric comes with a 95% confidence interval; infrastructure "
                          "failures are excluded and counted, never scored as 0.")),
        code(params or parameters_source(task, spec), "parameters"),
        code("from evekit.runs.task import TaskRun\n\nrun = TaskRun.from_notebook(globals())\nrun.settings()"),
        new_markdown_cell("## Load\nRows in the task's schema (a hub id or a local file, same code path)."),
        code("items = run.load()\nprint(f\"{len(items)} items from {run.shown_dataset}\")\nitems.head()"),
        new_markdown_cell("## What the model sees\nThe first prompt exactly as it is sent."),
        code("run.show_prompts(1)"),
        new_markdown_cell("## Generate\nCalls are cached on disk as they complete, run concurrently and "
                          "retried; an interrupted run resumes where it stopped."),
        # Progress bars differ from run to run: nbval ignores this cell's output.
        code("# NBVAL_IGNORE_OUTPUT\nrun.generate();"),
        code("run.counts()"),
    ]
    if judged:
        cells += [
            new_markdown_cell("## Judge\nEach judge sees the question, the reference and the answer, "
                              "clearly delimited. A judge that fails on an item abstains there: the "
                              "abstention is recorded with its reason and never counted as FAIL."),
            code("# NBVAL_IGNORE_OUTPUT\nverdicts = run.judge()"),
            code("run.judge_summary()"),
        ]
    cells += [
        new_markdown_cell(METRICS_ANCHOR + "## Metrics\nValue, 95% interval (`method`: Wilson for shares, BCa bootstrap for "
                          "graded scores, Wilson on the conditional binomial for precision, recall and F1, a "
                          "percentile bootstrap over items for MCC and macro-F1) and the number of items "
                          "behind it. Where items have one gold "
                          "letter or label: chance and always giving the most frequent gold answer, for "
                          "comparison."),
        code("run.metrics_table()"),
        new_markdown_cell("Answers the model gave in an unusable form (scored wrong), and infrastructure "
                          "failures (excluded):"),
        code("run.show_failures()"),
    ]
    if judged:
        cells += [
            new_markdown_cell("## Judge agreement\nPairwise raw agreement and Cohen's kappa between judges."),
            code("run.judge_agreement()"),
            new_markdown_cell("## Judge-corrected scores\nA judge's pass rate carries its errors. With "
                              "`expert_labels` (a random draw of this run's items, `evekit label sample`, "
                              "labelled by an expert) each judged score is also given corrected by "
                              "prediction-powered inference (`_ppi`), beside the labels alone, then the "
                              "judges' agreement with the labels (with `judge_validation`, the validation "
                              "set's accuracy and kappa beside it: `validated_*`); with only "
                              "`judge_validation`, corrected by the validated sensitivity and specificity "
                              "(`_rg`, assuming the judge errs here as it did there)."),
            code("run.corrected_scores()"),
        ]
    cells += [
        new_markdown_cell("## Plots"),
        code("figures = run.plots()"),
        new_markdown_cell("## By group\nEvery metric per value of the `group_by` column, with its interval "
                          "and n (set `group_by` to a column of the dataset, e.g. `\"topic\"`)."),
        code("run.by_group()"),
        new_markdown_cell("## Repeats, clusters and shuffled options\nWith `repeats`, each metric's interval "
                          "resamples items with all their answers, and splits its variance into run-to-run "
                          "noise (more repeats help) and item-to-item spread (only more items help); with "
                          "`cluster_by` it resamples clusters; with `permutations` (multiple choice) the "
                          "options are shuffled and robust accuracy and consistency are shown."),
        code("run.design_table()"),
        new_markdown_cell("## Worst items\nRead these before trusting the number: only the items the model "
                          "failed (unparsed, or below the top score), each in full, with whether the answer "
                          "was cut off at `max_tokens` and the judges' rationales."),
        code("run.worst(5)"),
        *([new_markdown_cell("## Hallucinated spans\nWith `level` \"hard_spans\", \"soft_spans\" or \"all\": the "
                             "items with the lowest IoU, each answer with the gold spans beside the predicted ones "
                             "(deeper colour: higher probability)."),
           code("run.span_view(5)")] if task == "hallucination_detection" else []),
        new_markdown_cell(EXPLORER_TEXT.format(unit="item", example="wrong", what=(
            "the messages sent (few-shot examples collapsed), the raw reply, the parsed answer, the gold answer "
            "and choices or documents, each judge's verdict and rationale, the scores, finish_reason, tokens "
            "and the error of a failed call. Filter by outcome (correct, wrong, unparsed, failed, truncated, "
            "judges disagree, abstained), by `group_by` or by a metric the item fails"))),
        code("run.explorer()"),
        new_markdown_cell("## Save\n`samples.csv` (one row per item), `model_outputs.jsonl` (per item the "
                          "exact prompt sent and the raw answer), `results.json`, `results.eee.jsonl` and "
                          "the plots. A run whose every call failed saves them too."),
        code("out_dir = run.save()"),
    ]
    return notebook(cells)


TASK_FILES = "None: the task file's"
# The custom task notebook's comments where its task file decides.
CUSTOM_COMMENTS = {"max_tokens": TASK_FILES, "num_fewshot": TASK_FILES, "split": TASK_FILES,
                   "dataset": f"{TASK_FILES} (a local file or a hub id)", "input_column": f"{TASK_FILES} column mapping",
                   "target_column": TASK_FILES, "judges": "for open_qa tasks: list of {name, model, base_url, api_key_env}"}
CUSTOM_PARAMETERS = parameters_cell(
    "task",
    {**DEMO, "task_file": "params/examples/tasks/sentinel_missions.yaml", "split": None,
     "cache_dir": "tests/fixtures/custom_cache"},
    CUSTOM_COMMENTS,
    header="# Parameters (papermill overrides these; see params/examples/custom_task.*.yaml). Defaults replay a\n"
           "# recorded run of the embedded model on the first example task, so this notebook runs anywhere, offline.",
    variant="custom")


def build_custom() -> nbformat.NotebookNode:
    """The generic notebook for custom tasks: the same story as the EVE task notebooks."""
    intro = ("# Your own task (`custom_task`)\n\nEvaluates a task you define in a YAML file: multiple "
             "choice and classification with a label list (accuracy, MCC, macro-F1; `scoring: logprobs` "
             "scores the first answer token's probabilities, with calibration), open questions judged by LLM "
             "judges, text-to-text (ROUGE-L, BLEU), extractive QA (token F1, exact match) or entity tagging "
             "(`token_classification`: micro-F1 over entity spans), on your own CSV, JSONL or Parquet "
             "file or a hub dataset. `task_file` is evekit's task YAML or a dataset's Inspect AI "
             "`eval.yaml`; see params/examples/tasks/. Batch: `papermill notebooks/custom_task.ipynb out.ipynb "
             "-f params/examples/custom_task.sentinel_missions.yaml`. Every metric comes with a 95% "
             "confidence interval; infrastructure failures are excluded and counted, never scored as 0.")
    return build("custom_task", {}, intro=intro, params=CUSTOM_PARAMETERS, judged=True)


def build_summary() -> nbformat.NotebookNode:
    cells = [
        new_markdown_cell("# Summary: leaderboard across tasks and models\n\nReads every `results.json` "
                          "of a run (and of `compare_runs`), shows the headline metric of each task with its "
                          "95% interval, tests whether two models differ on the items both answered, and "
                          "adds up the usage."),
        code(parameters_cell("summary", {"run_name": DEMO["run_name"]},
                             header="# Parameters (papermill overrides these; see params/demo/summary.yaml)"),
             "parameters"),
        code("from evekit.runs.summary import SummaryRun\n\nrun = SummaryRun.from_notebook(globals())\nrun.found()"),
        new_markdown_cell(METRICS_ANCHOR + "## Leaderboard\nHeadline metric per task: value [95% CI]."),
        code("run.leaderboard_wide()"),
        code("run.board_table()"),
        code("figure = run.chart()"),
        new_markdown_cell("## Are two models different?\nOn the items both answered: McNemar's exact test "
                          "with a Bonett-Price 95% interval of the difference for 0/1 scores, a sign-flip "
                          "permutation test with a BCa interval otherwise; `p_holm` adjusts the p-values for "
                          "testing every pair (Holm). A headline corrected by expert labels is compared on its "
                          "raw verdicts (`metric` names them): a corrected paired difference needs an expert's "
                          "labels of both models' answers to the same items."),
        code("run.paired_tests()"),
        new_markdown_cell("## What can this many items detect?\nFor each task, the smallest difference in "
                          "its headline metric that a paired test of two models detects with 80% power at alpha "
                          "0.05, for its n: from the observed pairs of models, or, with one model, assuming a "
                          "second one of the same score that errs independently."),
        code("run.detectable()"),
        new_markdown_cell("## Ranking\nWhen the run has a ranking notebook's output (`ranking/<task>/`): its "
                          "pooled Bradley–Terry ratings on the Elo scale with 95% intervals over questions; rank = 1 + "
                          "the number of models whose interval lies entirely above."),
        code("run.rankings()"),
        new_markdown_cell("## Usage\nRequests sent, cache hits, tokens and seconds per run."),
        code("# NBVAL_IGNORE_OUTPUT\n# (wall seconds differ from run to run)\nrun.usage()"),
        code("out = run.save()"),
    ]
    return notebook(cells)


def build_judge_validation() -> nbformat.NotebookNode:
    """notebooks/judge_validation.ipynb: the judges measured against expert labels."""
    demo = {"labels": "data/judge_validation/pointwise.jsonl", "judges": DEMO_JUDGES, "both_orders": False,
            "concurrency": DEMO["concurrency"], "cache_dir": DEMO["cache_dir"], "run_name": DEMO["run_name"]}
    header = ("# Parameters (papermill overrides these; see params/demo/judge_validation*.yaml). Defaults replay a\n"
              "# recorded run of the embedded model as judge from a committed cache; set base_url in judges to call yours.")
    cells = [
        new_markdown_cell(
            "# Judge validation: can these judges be trusted?\n\nEvery open-ended score rests on LLM judges. "
            "This notebook measures judges against answers whose verdict experts fixed: a pointwise judge "
            "(`fact_check`, `context`, `refusal`: PASS or FAIL) or the pairwise judge of the win rate (A, B or "
            "tie). Per judge and for the panel's vote: accuracy, Cohen's kappa against the labels, sensitivity "
            "(gold PASS judged PASS), specificity (gold FAIL judged FAIL), each with a 95% interval, and the "
            "abstentions with their reasons; per case type (paraphrase, units, injection, ...) where the judges "
            "go wrong. Batch: `papermill notebooks/judge_validation.ipynb out.ipynb -f "
            "params/demo/judge_validation.yaml`. The bundled set is `data/judge_validation/` (see its README)."),
        code(parameters_cell("judge_validation", demo, header=header), "parameters"),
        code("from evekit.runs.judge_validation import ValidationRun\n\nrun = ValidationRun.from_notebook(globals())\n"
             "run.settings()"),
        new_markdown_cell("## Load\nThe labelled items per case type and label. The label is never shown to "
                          "the judges, nor the case type."),
        code("run.load()"),
        new_markdown_cell("## Judge\nEvery judge sees every item exactly as in a task notebook (same prompts, "
                          "same parsing). A reply that is not a verdict (a copied template, a rationale that "
                          "names the other side, a quoted verdict) is an abstention with its reason."),
        code("# NBVAL_IGNORE_OUTPUT\n# (requests and cache hits differ between recording and replay)\nrun.judge()"),
        new_markdown_cell(METRICS_ANCHOR + "## Agreement with the experts\n`n`: items with a usable verdict; abstentions are "
                          "left out and counted, never scored. A judge without verdicts has no accuracy "
                          "(`–`), not 0. Kappa corrects for chance: a judge that always says FAIL scores the "
                          "share of FAIL labels in accuracy but kappa 0."),
        code("run.table()"),
        new_markdown_cell("## Per case type\nAccuracy (right / usable verdicts) per case type: which mistakes "
                          "each judge makes."),
        code("run.per_case()"),
        new_markdown_cell("## Abstentions\nWhy judges gave no verdict, per judge."),
        code("run.abstentions()"),
        new_markdown_cell("## Plots"),
        code("figures = run.plots()"),
        new_markdown_cell("## Where the panel is wrong\nItems whose vote is not the label, with each judge's "
                          "reasoning (or why it abstained)."),
        code("run.disagreements(5)"),
        new_markdown_cell(EXPLORER_TEXT.format(unit="validated answer", example="wrong", what=(
            "the question, the reference, the answer judged, the expert label, the panel's vote and each "
            "judge's verdict and reasoning (or why it abstained). Filter by outcome (correct: the vote is the "
            "label, wrong, abstained, judges disagree) or by case type"))),
        code("run.explorer()"),
        new_markdown_cell("## What this means for judged scores"),
        code("from IPython.display import Markdown\n\nMarkdown(run.interpretation())"),
        new_markdown_cell("## Save\n`judge_validation.csv` (one row per judge and the vote), `per_case.csv`, "
                          "`verdicts.csv` (every decision with the judges' replies), the plots and "
                          "`results.json`, which task and win-rate notebooks take as `judge_validation`."),
        code("out_dir = run.save()"),
    ]
    return notebook(cells)


# The ranking notebook's demo: the recorded open_ended runs of the embedded model, zero-shot, five-shot
# and zero-shot at temperature 0.7 (copied to tests/fixtures/ by scripts/record_notebooks.py).
RANKING_DEMO = dict(
    task="open_ended",
    models=[{"name": "smollm2-0shot", "file": "tests/fixtures/win_rate/open_ended_0shot.csv"},
            {"name": "smollm2-5shot", "file": "tests/fixtures/win_rate/open_ended_5shot.csv"},
            {"name": "smollm2-0shot-t0.7", "file": "tests/fixtures/ranking/open_ended_t07.csv"}],
    judges=DEMO_JUDGES, concurrency=4, cache_dir="tests/fixtures/recorded_cache", run_name="recorded")


def build_ranking() -> nbformat.NotebookNode:
    cells = [
        new_markdown_cell(
            "# Ranking many models: Bradley–Terry ratings from a panel of LLM judges\n\n"
            "LLM judges compare the answers of several models to the same Earth-Observation questions, two at a "
            "time, and say which is better (or that it is a tie). Each decision is a *battle*; the battles become "
            "one rating per model by **Bradley–Terry** maximum likelihood (a tie is half a win; every decision "
            "counts once), on the Elo scale: +400 points means ten times the odds of winning; the mean rating is "
            "1000, or the `baseline`'s rating is 1000 when one is set. Intervals: 95%, by bootstrap over "
            "**questions** (battles on one question are correlated). **Rank** = 1 + the number of models whose "
            "interval lies entirely above (Chatbot Arena's rule), so models the data cannot separate share a rank. "
            "A **style-controlled** rating adds the answers' length difference to the model (as Arena-Hard does): "
            "a model that wins only by writing more drops there.\n\n"
            "Every judge is fitted alone and all together (*pooled*); Kendall's τ says how far the judges agree "
            "on the order. With `both_orders=True` each pair is judged both ways round; `max_pairs_per_question` "
            "judges only k pairs per question to keep many models affordable (the cost is printed before any call).\n\n"
            "Run it top to bottom in JupyterLab, or in batch: "
            "`papermill notebooks/ranking.ipynb out.ipynb -f params/demo/ranking.yaml`. The default parameters "
            "rank three runs of the tiny SmolLM2-135M demo model judged by itself: they show that the pipeline "
            "works and are not a finding about any model."),
        code(parameters_cell("ranking", RANKING_DEMO), "parameters"),
        code("import pandas as pd\nfrom IPython.display import Markdown\n\nfrom evekit.runs.ranking import RankingRun\n\n"
             "pd.set_option(\"display.max_colwidth\", 160)\nrun = RankingRun.from_notebook(globals())\n"
             "if run.demo_note:\n    print(run.demo_note)\nrun.setup_table()"),
        new_markdown_cell("## Matching the models' answers\n\nRows are matched by question (whitespace-normalised) "
                          "across the files. A model whose generation failed on a question sits that question out "
                          "(an infrastructure failure says nothing about the model); a question needs at least two "
                          "models with an answer. `limit` keeps the first N questions."),
        code("run.load()"),
        code("left_out = run.left_out_table()\n"
             "left_out if len(left_out) else Markdown(\"Every row of every file is ranked on.\")"),
        new_markdown_cell("## Judging\n\nFirst the cost: the number of judge calls, before any is made. Then each "
                          "judge sees the question, the reference answer and two answers (who is shown first is "
                          "random, fixed by `seed`), and replies with a rationale and a winner (`A`, `B` or `tie`). "
                          "A reply that is not one of these leaves the battle without a winner: it is counted and "
                          "excluded, never a tie or a loss. Identical answers are a tie without a call."),
        code("plan = run.plan()"),
        code("# NBVAL_IGNORE_OUTPUT\nrun.judge()"),
        code("run.counts()"),
        new_markdown_cell(METRICS_ANCHOR + "## Ratings\n\nAll judges pooled. *battles*: the decisions with a verdict that the model "
                          "took part in. With a baseline: each model's predicted chance of beating it (ties half)."),
        code("run.rate()"),
        new_markdown_cell("## Do the judges agree?\n\nEach judge's ranking (rank · rating [95% CI]) beside the pooled "
                          "one, and Kendall's τ between every two judges' ratings (1: the same order, −1: reversed; "
                          "with few models its p-value cannot be small). A note follows when two judges order two "
                          "models oppositely although the pooled intervals of those models do not overlap."),
        code("run.judges_table()"),
        code("run.judge_agreement()"),
        new_markdown_cell("## Can these judges be trusted?\n\nWhen `judge_validation` names the results of the "
                          "judge-validation notebook, the judges' accuracy against expert labels is shown here."),
        code("run.judge_validation_table()"),
        new_markdown_cell("## Plots\n\nRatings with their intervals (and the style-controlled ones); the win "
                          "probabilities the pooled ratings predict for every pair; each judge's ratings side by side."),
        code("run.plots()"),
        new_markdown_cell("## What the judges said\n\nA few decisions with the judge's rationale (`model_a`: the model "
                          "whose answer was shown first)."),
        code("run.rationales(5)"),
        new_markdown_cell(EXPLORER_TEXT.format(unit="battle", example="tie", what=(
            "the question, the reference, both answers (A: shown first), the judge's verdict and rationale "
            "and what the other judges said on the same battle. Filter by outcome (A wins, B wins, tie, "
            "abstained, judges disagree) or by judge"))),
        code("run.explorer()"),
        new_markdown_cell("## Save\n\n`battles.csv` (every judge decision), `ratings.csv` (per judge and pooled), "
                          "`left_out.csv`, `kendall_tau.csv`, `results.json` and the plots, in "
                          "`outputs/<run_name>/ranking/<task>/`."),
        code("saved = run.save()"),
    ]
    return notebook(cells)


# The win-rate notebook's demo: the recorded zero-shot and five-shot open_ended runs, judged as recorded
# (the judges' replies bounded by judge_max_tokens, without a bound on their reasoning).
WIN_RATE_DEMO = dict(
    task="open_ended",
    model_a=[{"name": "smollm2-0shot", "file": "tests/fixtures/win_rate/open_ended_0shot.csv"}],
    model_b=[{"name": "smollm2-5shot", "file": "tests/fixtures/win_rate/open_ended_5shot.csv"}],
    judges=[{k: v for k, v in j.items() if k not in ("max_tokens", "reasoning_max_chars")} for j in DEMO_JUDGES],
    cache_dir=DEMO["cache_dir"], run_name=DEMO["run_name"])


def build_win_rate() -> nbformat.NotebookNode:
    cells = [
        new_markdown_cell(
            "# Win rate: which of two models answers better, according to LLM judges\n\n"
            "Several LLM judges compare the answers of two models to the same Earth-Observation questions, one\n"
            "question at a time, and say which answer is better (or that it is a tie). This follows EVE's\n"
            "win-rate evaluation: **win rate** = wins / questions, **alpaca win rate** = (wins + ½ ties) / questions,\n"
            "per judge and averaged across judges. It adds a **majority vote** of the judges, 95% Wilson intervals,\n"
            "an exact **sign test** (is the difference more than chance?), and checks of two known judge biases:\n"
            "**position bias** (preferring the answer shown first) and **length bias** (preferring the longer answer).\n\n"
            "The answers are shown to the judges in a random order fixed by `seed` and the question, so reruns give\n"
            "the same numbers. With `both_orders=True` each pair is judged in both orders and a verdict that flips\n"
            "with the order counts as a tie. Answer pairs are matched by question; nothing is dropped silently: rows\n"
            "that could not be matched or whose generation failed are listed below.\n\n"
            "Run it top to bottom in JupyterLab, or in batch: `papermill notebooks/win_rate.ipynb out.ipynb -f "
            "params/demo/win_rate.yaml`.\nThe default parameters compare two runs of the tiny SmolLM2-135M demo model "
            "judged by itself: they show\nthat the pipeline works and are not a finding about any model."),
        code(parameters_cell("win_rate", WIN_RATE_DEMO), "parameters"),
        code("import pandas as pd\nfrom IPython.display import Markdown\n\nfrom evekit.runs.win_rate import WinRateRun\n\n"
             "pd.set_option(\"display.max_colwidth\", 160)\nrun = WinRateRun.from_notebook(globals())\nrun.setup_table()"),
        new_markdown_cell("## Matching the two models' answers\n\nRows are paired by question (whitespace-normalised). "
                          "Pairs where either model's generation failed are\nexcluded (an infrastructure failure says "
                          "nothing about the model); identical answers are a tie without a\njudge call. `limit` keeps "
                          "the first N usable pairs."),
        code("run.load()"),
        new_markdown_cell("Rows left out of the comparison, with the reason:"),
        code("left_out = run.unmatched_table()\n"
             "left_out if len(left_out) else Markdown(\"Every row of both files was matched and usable.\")"),
        new_markdown_cell("## Judging\n\nEach judge sees the question, the reference answer and the two answers, and "
                          "replies with a short\nrationale and a winner (`A`, `B` or `tie`). A reply that is not one of "
                          "these is recorded as a failed\ndecision and excluded, never counted as a tie or a loss."),
        code("# NBVAL_IGNORE_OUTPUT\nrun.judge()"),
        new_markdown_cell(METRICS_ANCHOR + "## Win rates\n\nPer judge, the majority vote of the judges, and the average across judges "
                          "(per question: with `both_orders`\nthe two orders of a question are combined, an "
                          "order-dependent verdict is a tie; EVE's own numbers follow). "
                          "In brackets: 95% Wilson\nintervals. *sign test p*: exact binomial test of wins against losses "
                          "(ties left out); *better* names a\nmodel only when p < 0.05. *position bias*: share of decisive "
                          "verdicts for the answer shown first (0.5 = none).\n*longer answer wins*: share of decisive "
                          "verdicts, among answers of different length, that went to the longer\none. *judge agreement*: "
                          "share of questions on which all judges gave the same verdict. *failed*: questions\nwithout a "
                          "usable verdict (excluded)."),
        code("run.summary_table()"),
        new_markdown_cell("### The same by EVE's definitions\n\nEVE's win-rate script counts every judge decision "
                          "on its own (both orders, when judged both ways), keeps a\nfailed decision in a judge's total "
                          "(not in its alpaca denominator), pools wins over all decisions\n(`aggregate/<model>_win_rate`) "
                          "and reports `win_rate_difference` as model_b - model_a. `metrics.json` keeps\nthese under "
                          "EVE's names (`win_rate/<judge>/<model>`, `aggregate/...`), and the figures above under "
                          "`evekit/...`."),
        code("run.eve_table()"),
        new_markdown_cell("## Judge-corrected win rate\n\nWith `expert_labels` (an expert's A / B / tie labels of a "
                          "random draw of a comparison's questions, `evekit label sample <comparison folder>`): the "
                          "vote's alpaca win rate of A corrected by prediction-powered inference, beside the labels "
                          "alone; then each judge's and the vote's accuracy and kappa against the labels."),
        code("run.corrected_scores()"),
        new_markdown_cell("## Plots\n\nShare of questions won, tied and lost per judge; position bias with its 95% "
                          "interval; how often each pair\nof judges agreed."),
        code("run.plots()"),
        new_markdown_cell("## What the judges said\n\nA few decisions with the judge's rationale (`shown_first`: the "
                          "model whose answer was shown as A)."),
        code("run.rationales(5)"),
        new_markdown_cell(EXPLORER_TEXT.format(unit="decision", example="tie", what=(
            "the question, the reference, both answers, which was shown first, the judge's verdict and "
            "rationale and what the other judges said. Filter by outcome (a model wins, tie, abstained, "
            "judges disagree) or by judge"))),
        code("run.explorer()"),
        new_markdown_cell("## Save\n\n`results.csv` (every judge decision), `summary.csv` (the table above in full), "
                          "`unmatched.csv`,\n`agreement.csv`, `metrics.json` (EVE's numbers under EVE's names, evekit's under `evekit/`) and the plots, one "
                          "folder per pair of models."),
        code("saved = run.save()"),
    ]
    return notebook(cells)


def main() -> int:
    only = set(sys.argv[1:])
    if not only or "judge_validation" in only:
        nbformat.write(build_judge_validation(), ROOT / "notebooks" / "judge_validation.ipynb")
        print("wrote notebooks/judge_validation.ipynb")
    if not only or "summary" in only:
        nbformat.write(build_summary(), ROOT / "notebooks" / "summary.ipynb")
        print("wrote notebooks/summary.ipynb")
    if not only or "ranking" in only:
        nbformat.write(build_ranking(), ROOT / "notebooks" / "ranking.ipynb")
        print("wrote notebooks/ranking.ipynb")
    if not only or "win_rate" in only:
        nbformat.write(build_win_rate(), ROOT / "notebooks" / "win_rate.ipynb")
        print("wrote notebooks/win_rate.ipynb")
    if not only or "custom_task" in only:
        nbformat.write(build_custom(), ROOT / "notebooks" / "custom_task.ipynb")
        print("wrote notebooks/custom_task.ipynb")
    assert set(TASKS) == set(CATALOGUE), "every task of the catalogue needs its notebook text here"
    for task, spec in TASKS.items():
        if only and task not in only:
            continue
        path = ROOT / "notebooks" / f"{task}.ipynb"
        nbformat.write(build(task, spec), path)
        print(f"wrote {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
