"""One task run, step by step, for the task notebooks.

Each method is one sentence of the notebook's story::

    run = TaskRun.from_notebook(globals())   # parameters, validated
    run.load()                               # rows in the task's schema
    run.show_prompts(2)                      # what the model sees
    run.generate()                           # model calls: cached, concurrent, retried
    run.judge()                              # LLM judges (open-ended tasks only)
    run.metrics_table()                      # metrics with 95% CIs, next to chance and the best constant answer
    run.plots()                              # figures, also saved as PNG
    run.by_group()                           # every metric per value of `group_by` (if set)
    run.worst(5)                             # failing items to read, in full
    run.save()                               # samples.csv, model_outputs.jsonl, results.json, results.eee.jsonl

A run whose every call failed (after its retries) still goes through every step and saves its
files: every item counted as failed, no metric value, plots skipped with the reason printed.
"""
from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path
from typing import Any

import pandas as pd

from evekit import plots, repeats, robustness, tasks
from evekit.demo import DEMO_MODEL_NOTE, demo_judge_note, demo_judges, is_demo_model
from evekit.errors import EndpointError, ParameterError
from evekit.naming import configuration_name
from evekit.paths import display_path, resolve_path
from evekit.report import MISSING, MISSING_REASONS, FullText, shown
from evekit.runs.base import NotebookRun
from evekit.runs.task.calls import ANSWERS, CHOICES_ONLY, LOGPROBS, SPANS, CallStep, plain
from evekit.runs.task.files import write_run
from evekit.runs.task.kind import KIND
from evekit.runs.task.params import TaskParams
from evekit.runs.task.results import build_results
from evekit.structured import as_results, ask_json, first_requests
from evekit.types import Usage

# How an answer the model gave in an unusable form is judged: not sent to the judges, FAIL by rule.
RULE_METHOD = "rule"
RULE_REASON = "unparsed answer: FAIL by rule (not sent to the judges)"
GROUP_PLOT = "by_group.png"
# Keys of a repeat-aware metric kept in results.json but not in the metrics table; design_table() shows the
# reader's ones (design effect, var_within, var_between and their shares).
CORRECTION_DETAILS = ("lambda", "ppi_py_ci_low", "ppi_py_ci_high", "width_ratio", "effective_labels", "labels_to_halve",
                      "n_judged", "n_labelled_abstained")
DESIGN_DETAILS = ("effective_n", "df", "repeats", "se", "design_effect", "design_effect_clusters", "var_within",
                  "var_between", "var_between_raw", "var_item_means", "share_within", "share_between",
                  "n_excluded")
TINY_MODEL_NOTE = DEMO_MODEL_NOTE  # the one wording, in evekit.demo


def _full_text(table: pd.DataFrame, caption: str | None = None) -> FullText:
    return FullText(table, caption)


# What an empty cell of the metrics tables means (its tooltip on the page: `report.table_html`).
METRIC_MISSING = "does not apply to this row, or undefined for these items (its method and the notes say why)"


def _why_missing(table: pd.DataFrame, reason: str) -> pd.DataFrame:
    """`table` with the sentence its empty cells show as their tooltip."""
    table.attrs[MISSING_REASONS] = reason
    return table


def _plain(value: Any) -> Any:
    """A samples cell as a JSON value: NaN / pd.NA -> None, numpy scalars -> Python."""
    if value is None or (not isinstance(value, (list, tuple, dict, str)) and pd.isna(value)):
        return None
    return value.item() if hasattr(value, "item") else value


# The span columns samples.csv holds as JSON text, decoded in model_outputs.jsonl.
_SPAN_LABELS = ("pred_spans", "gold_hard_labels", "gold_soft_labels", "pred_hard_labels", "pred_soft_labels")


def _json_cell(value: Any) -> Any:
    """A samples cell holding JSON text as its JSON value; None for a missing one (a failed or
    unparsable span reply has no predicted spans)."""
    value = _plain(value)
    return json.loads(value) if isinstance(value, str) else value


class TaskRun(NotebookRun):
    """One model on one task, step by step (the methods are the notebook's cells)."""

    Params = TaskParams
    Kind = KIND

    def __init__(self, config: TaskParams, task: tasks.Task | None = None,
                 clients: dict[str, Any] | None = None) -> None:
        """`task`: a custom task (evekit.custom); default: the EVE task or the `task_file` of `config`."""
        super().__init__(config, clients)
        if task is None and config.task_file:
            from evekit.custom import load_task

            task = load_task(config.task_file, offline=config.offline)
        self.task = task or tasks.get_task(config.task)
        # The parameter wins over the task file's `scoring`; EVE tasks score the text by default.
        self.scoring = config.scoring or getattr(self.task, "scoring", "text")
        try:
            self.task = tasks.scoring_task(self.task, self.scoring)
        except ValueError as exc:
            raise ParameterError(str(exc)) from None
        # Hallucination detection's level: the binary question, the hallucinated spans, or both.
        self.level = config.level
        self.binary_task = self.task
        if self.level != "binary":
            if config.repeats > 1 or config.cluster_by:
                raise ParameterError(f"level={self.level!r} with repeats or cluster_by is not supported yet: the "
                                     "span metrics' intervals resample single items")
            self.task = tasks.level_task(self.task, self.level)
        self.span_results: list[Any] = []
        self.span_requests: list[Any] = []
        self.span_max_tokens = tasks.SPAN_MAX_TOKENS  # set from the items by load (tasks.span_max_tokens)
        self.logprob_requests: list[Any] = []
        self.logprob_results: list[Any] = []  # GenerationResult per item when log-probabilities are scored
        self.items: list[Any] = []
        self.requests: list[Any] = []
        self.results: list[Any] = []  # GenerationResult per item, aligned with items and requests
        self.step_results: dict[str, list[Any]] = {}  # per step of model_calls(): its results, in order
        # With repeats or permutations `items` holds one entry per answer asked for (an item once per
        # repeat or option order, `fields["repeat"]` / `["permutation"]`); `base_items` each item once.
        self.base_items: list[Any] = []
        self.choices_only_items: list[Any] = []
        self.choices_only_requests: list[Any] = []
        self.choices_only_samples: pd.DataFrame | None = None
        self.corrections: dict[str, Any] = {}  # judge-corrected scores (`expert_labels`, `judge_validation`)
        self.samples: pd.DataFrame | None = None
        self.judge_names: list[str] = []
        self.metrics: dict[str, dict] = {}
        self.usage = Usage()
        self.judge_usage = Usage()
        self.figures: dict[str, Any] = {}
        self.group_table: pd.DataFrame | None = None
        self._streamed: dict[str, dict[int, Any]] | None = None  # judge answers made during generate()
        self._stream_panel: Any = None

    @classmethod
    def from_notebook(cls, namespace: dict[str, Any]) -> "TaskRun":
        task = None
        if namespace.get("task_file"):  # a custom task: its name comes from its file
            from evekit.custom import load_task

            task = load_task(namespace["task_file"], offline=bool(namespace.get("offline")))
            namespace = {**namespace, "task": task.name}
        return cls(TaskParams.from_notebook(namespace), task)

    # -- parameters ---------------------------------------------------------------------------
    @property
    def is_demo_model(self) -> bool:
        """The tiny embedded model: its reports carry a note that its scores are no finding."""
        return is_demo_model(self.config.model_name)

    @property
    def demo_judges(self) -> list[str]:
        """The judges that are the embedded demo model (judged tasks only): their reports say so."""
        return demo_judges(self.config.judge_specs()) if self.task.judge_kind else []

    @classmethod
    def from_params(cls, clients: dict[str, Any] | None = None, **params: Any) -> "TaskRun":
        """From keyword parameters (scripts and tests); a custom task through its `task_file`."""
        run = cls.from_notebook(params)
        run.clients = clients
        return run

    @property
    def answered(self) -> pd.DataFrame:
        """Samples whose generation did not fail (infrastructure failures are excluded everywhere)."""
        assert self.samples is not None, "run generate() first"
        return self.samples[~self.samples["failed"]]

    @property
    def name(self) -> str:
        """This configuration's display name on every page: 'model · run' (`naming.configuration_name`)."""
        return configuration_name(self.config.model_name, self.config.run_name)

    @property
    def num_fewshot(self) -> int:
        c = self.config
        return self.task.default_num_fewshot if c.num_fewshot is None else c.num_fewshot

    @property
    def max_tokens(self) -> int:
        c = self.config
        return tasks.default_max_tokens(self.task) if c.max_tokens is None else c.max_tokens

    @property
    def dataset(self) -> str:
        return self.config.dataset or self.task.hub_id

    @property
    def shown_dataset(self) -> str:
        """The dataset as the pages show it: a file relative to the checkout or the working
        directory (no machine's absolute path), a hub id as given."""
        return display_path(resolve_path(self.dataset)) if Path(self.dataset).suffix else self.dataset

    @property
    def split(self) -> str:
        return self.config.split or self.task.split

    def settings(self) -> pd.DataFrame:
        c = self.config
        if self.is_demo_model:
            print(f"Note: {TINY_MODEL_NOTE}")
        if self.demo_judges:
            print(f"Note: {demo_judge_note(self.demo_judges)}")
        rows = {
            "task": c.task, "model": c.model_name, "api": c.api,
            "dataset": self.shown_dataset,
            "num_fewshot": self.num_fewshot, "fewshot_sampler": c.fewshot_sampler,
            "max_tokens": self.max_tokens, "temperature": c.temperature, "seed": c.seed,
            "limit": c.limit or "all", "judges": ", ".join(j.name for j in c.judge_specs()) or "none",
            **({"group_by": c.group_by} if c.group_by else {}),
            **({"repeats": f"{c.repeats} over {c.repeat_over}, reducer {c.reducer}"} if c.repeats > 1 else {}),
            **({"cluster_by": c.cluster_by} if c.cluster_by else {}),
            **({"permutations": f"{c.permutations} option orders (the first the original)"}
               if c.permutations else {}),
            **({"choices_only": "baseline with the question withheld"} if c.choices_only else {}),
            **({"fewshot_split": c.fewshot_split} if c.fewshot_split else {}),
            **({"level": c.level} if c.level != "binary" else {}),
            **({"scoring": self.scoring} if self.scoring != "text" else {}),
            "offline (replay from cache)": c.offline,
            **({"tracking": c.tracking_config.backend} if c.tracking_config else {}),
        }
        if c.task_file:
            rows = {"task file": c.task_file, "kind": self.task.kind, **rows, "split": self.split}
            if self.task.labels:
                rows["labels"] = ", ".join(self.task.labels)
        mapping = {**dict(self.task.column_mapping), **self._mapping()}
        rows.update({k: v for k, v in mapping.items() if v is not None})
        return pd.DataFrame({"value": [str(v) for v in rows.values()]}, index=pd.Index(list(rows), name="setting"))

    # -- load ---------------------------------------------------------------------------------
    def _mapping(self) -> dict[str, Any]:
        c = self.config
        return {k: getattr(c, k) for k in ("input_column", "target_column", "choices_column", "context_columns")
                if getattr(c, k) is not None}

    def load(self) -> pd.DataFrame:
        from evekit.prepare import resolve_prepared

        dataset = self.dataset
        if Path(dataset).suffix:
            dataset = str(resolve_path(dataset))
        elif self.config.offline:  # a hub id: use the copy `evekit prepare` made, if any
            dataset = str(resolve_prepared(dataset, self.split) or dataset)
        # Few-shot examples come from the whole split (as in EVE), not only from the first `limit` items.
        c = self.config
        pool = tasks.load_items(self.task, dataset, split=self.split, offline=c.offline,
                                config=self.task.config, group_by=c.group_by, cluster_by=c.cluster_by,
                                **self._mapping())
        self.base_items = pool[: c.limit] if c.limit else pool
        self.n_available = len(pool)  # the split's items before `limit` (the cards' "n of N")
        if c.fewshot_split:  # shots from another split (EuroEval's train split) or another file
            shots_from = str(resolve_path(c.fewshot_split)) if Path(c.fewshot_split).suffix else dataset
            split = self.split if Path(c.fewshot_split).suffix else c.fewshot_split
            pool = tasks.load_items(self.task, shots_from, split=split, offline=c.offline, config=self.task.config,
                                    **self._mapping())
        self._check_design()
        self.items, self.requests = self._design_requests(self.base_items, pool)
        if self.level != "binary":  # the span question, as ask_spans first sends it
            self.span_max_tokens = tasks.span_max_tokens(self.items)
            self.span_requests = [tasks.span_request(it, self.level, api=c.api, temperature=c.temperature,
                                                     max_tokens=self.span_max_tokens) for it in self.items]
            if self.level != "all":
                self.requests = self.span_requests
        if c.choices_only:  # the same items and shots with the question withheld
            def withheld(item: Any) -> Any:
                return dataclasses.replace(item, **robustness.choices_only(item.fields))
            self.choices_only_items = [withheld(it) for it in self.base_items]
            self.choices_only_requests = self._requests(self.base_items, pool, seed=c.seed, shown=withheld)
        if self.scoring != "text":  # the same prompts, asking for the first token's log-probabilities
            self.logprob_requests = tasks.logprob_requests(self.requests)
        return pd.DataFrame([{"doc_id": it.doc_id, "question": it.question, "target": it.target}
                             for it in self.base_items])

    def _check_design(self) -> None:
        """The checks of repeats and permutations that need the task (a custom one's kind)."""
        c = self.config
        multiple_choice = "choices" in (self.base_items[0].fields if self.base_items else {"choices": ()})
        for name in ("permutations", "choices_only"):
            if getattr(c, name) and not multiple_choice:
                raise ParameterError(f"parameter {name} applies to multiple-choice tasks; {c.task} "
                                     f"({self.task.kind}) has no options to shuffle or show alone")
        if c.permutations == 1:
            raise ParameterError("permutations=1 is the original order only: use 0 (off) or >= 2 orders")
        if c.repeats > 1 and c.repeat_over in ("fewshot", "both") and self.num_fewshot == 0:
            raise ParameterError(f"repeat_over={c.repeat_over!r} draws fresh few-shot examples per repeat, but "
                                 f"num_fewshot is 0 for {c.task}: set num_fewshot, or repeat_over='sampling'")

    def _requests(self, items: list[Any], pool: list[Any], *, seed: int, sampler: str | None = None,
                  shown: Any = None) -> list[Any]:
        c = self.config
        return tasks.build_requests(self.task, items, api=c.api, num_fewshot=self.num_fewshot,
                                    fewshot_sampler=sampler or c.fewshot_sampler, seed=seed,
                                    temperature=c.temperature, max_tokens=self.max_tokens, pool=pool, shown=shown)

    def _design_requests(self, items: list[Any], pool: list[Any]) -> tuple[list[Any], list[Any]]:
        """One entry per answer asked for: each item under each option order (`permutations`), or
        each item once per repeat (`repeats`; repeat 0 is the run without repeats, cache keys
        included: `repeats.repeat_seed`). Repeat r > 0 sends its own seed (`sampling`) and/or draws
        its own few-shot examples at random with that seed (`fewshot`)."""
        c = self.config
        if c.permutations:
            shuffled = [dataclasses.replace(it, **change) for it in items
                        for change in robustness.permuted_items(it.fields, c.permutations, seed=[c.seed, it.doc_id])]
            return shuffled, self._requests(shuffled, pool, seed=c.seed)
        if c.repeats == 1:
            return list(items), self._requests(list(items), pool, seed=c.seed)
        out_items, out_requests = [], []
        for r in range(c.repeats):
            seed = repeats.repeat_seed(c.seed, r)
            new_shots = r > 0 and c.repeat_over in ("fewshot", "both")
            requests = self._requests(list(items), pool, seed=seed if new_shots else c.seed,
                                      sampler="random" if new_shots else None)
            sampling = c.repeat_over in ("sampling", "both")
            out_requests += [dataclasses.replace(q, seed=seed if sampling else c.seed) for q in requests]
            out_items += [dataclasses.replace(it, fields={**it.fields, "repeat": r}) for it in items]
        return out_items, out_requests

    @property
    def design(self) -> repeats.Design | None:
        """How the samples' rows group into items and clusters for the intervals (None: one row per
        item, no clusters: the intervals of a run without repeats)."""
        c = self.config
        if c.repeats == 1 and not c.cluster_by:
            return None
        return repeats.Design(cluster_column=tasks.CLUSTER_COLUMN if c.cluster_by else None, reducer=c.reducer)

    @property
    def primary(self) -> pd.DataFrame:
        """The rows a run without permutations would have (option order 0): what the task's metrics
        and baselines are computed on; with repeats every repeat (the design groups them)."""
        assert self.samples is not None, "run generate() first"
        s = self.samples
        return s[s["permutation"] == 0] if "permutation" in s else s

    def show_prompts(self, n: int = 1) -> None:
        """Print the first `n` prompts exactly as they are sent."""
        for item, request in list(zip(self.items, self.requests))[:n]:
            design = "".join(f", {k} {item.fields[k]}" for k in ("repeat", "permutation") if k in item.fields)
            print(f"----- doc_id {item.doc_id}{design} ({self.config.api}) -----")
            if request.messages is not None:
                for m in request.messages:
                    print(f"[{m['role']}]\n{m['content']}\n")
            else:
                print(request.prompt)
            print(f"[expected] {item.target}\n")

    # -- generate -----------------------------------------------------------------------------
    def _client(self, model: str, base_url: str, api_key_env: str | None, name: str,
                concurrency: int | None = None) -> Any:
        return self.client(model, base_url, api_key_env, name, concurrency)

    def model_calls(self) -> list[CallStep]:
        """Every model call this run makes, as the steps `generate` sends, in its order (after
        `load`): the answers the task is scored on (the span question at the span-only levels, the
        log-probability requests when they are the only scoring, a JSON reply for a task with a
        `json_schema` on chat), then the span question beside the binary answer (level `all`), the
        log-probability requests beside the text (scoring `both`) and the choices-only baseline.
        Repeats and option orders are entries of `items` / `requests` (`load`). The one list
        `generate` sends and `evekit plan` counts; judge calls come after, one per answer of the
        `judged` step that parses, per judge."""
        c = self.config
        items = tuple(self.items)
        steps: list[CallStep] = []
        if self.level in ("hard_spans", "soft_spans"):  # the span call is the only call
            steps.append(self._span_step())
        elif self.scoring == "logprobs":  # the log-probability requests are the run's only answers
            steps.append(CallStep(LOGPROBS, tuple(self.logprob_requests), items,
                                  lambda client, desc, _=None: self._logprobs(client, desc)))
        elif self._json_schema is not None:  # one JSON object per item through the structured chain
            messages, args = self._json_ask()
            steps.append(CallStep(ANSWERS, tuple(first_requests(messages, **args)), items,
                                  lambda client, desc, _=None: self._json_answers(client, desc), structured=True))
        else:
            judged = self.task.judge_kind is not None and bool(c.judge_specs())
            steps.append(CallStep(ANSWERS, tuple(self.requests), items, plain(self.requests), judged=judged))
        if self.level == "all":  # the binary answer, then the spans of the same item
            steps.append(self._span_step())
        if self.scoring == "both":  # the same prompts again, for the first token's log-probabilities
            steps.append(CallStep(LOGPROBS, tuple(self.logprob_requests), items,
                                  lambda client, desc, _=None: self._logprobs(client, desc), label=" (logprobs)"))
        if self.choices_only_requests:  # the baseline's calls: the same options, no question
            steps.append(CallStep(CHOICES_ONLY, tuple(self.choices_only_requests), tuple(self.choices_only_items),
                                  plain(self.choices_only_requests), label=" (choices only)"))
        return steps

    def _span_step(self) -> CallStep:
        c = self.config

        def send(client: Any, desc: str, _: Any = None) -> list[Any]:
            return tasks.ask_spans(client, self.items, self.level, api=c.api, temperature=c.temperature,
                                   max_tokens=self.span_max_tokens, desc=desc)

        return CallStep(SPANS, tuple(self.span_requests), tuple(self.items), send, structured=True, label=" (spans)")

    def generate(self, *, embeddings: bool | None = None) -> pd.DataFrame:
        """Every model call (`model_calls`, step by step); on a judged task the judges start on each
        answer as soon as it is in (pipelined: `evekit.judges.JudgeStream`), and this returns when
        both are done. `judge()` then only puts the verdicts in the table. `embeddings`: compute the
        cosine metric of open tasks (None: when the extra is installed; `evekit plan` turns it off)."""
        c = self.config
        client = self._client(c.model_name, c.base_url, c.api_key_env, c.model_name)
        desc = f"{c.task} · {c.model_name}"
        steps = self.model_calls()
        stream = self._judge_stream(client) if any(s.judged for s in steps) else None
        got: dict[str, list[Any]] = {}
        try:
            for step in steps:
                streamed = step.judged and stream is not None
                on_result = (lambda i, res: stream.submit(i, self._judge_case(i, res))) if streamed else None
                got[step.name] = list(step.send(client, desc + step.label, on_result))
                if streamed:
                    stream.close()  # every answer is in: the judges finish while the other steps run
        finally:
            if stream is not None:
                stream.close()
        self.step_results = got
        results = self.results = got[steps[0].name]
        if SPANS in got:
            self.span_results = got[SPANS]
        if self.level == "binary":
            # (while the judges finish)
            self.samples = tasks.score_samples(self.task, self.items, results, embeddings=embeddings)
        elif self.level == "all":
            binary = tasks.score_samples(self.binary_task, self.items, results, embeddings=embeddings)
            self.samples = tasks.add_span_columns(binary, self.items, self.span_results, self.level)
        else:
            self.samples = tasks.add_span_columns(None, self.items, self.span_results, self.level)
        if self.scoring != "text":
            self.samples = tasks.add_logprob_scores(self.task, self.items, got[LOGPROBS], self.samples,
                                                    replace_text=self.scoring == "logprobs")
        if CHOICES_ONLY in got:
            self.choices_only_samples = tasks.score_samples(self.task, self.choices_only_items, got[CHOICES_ONLY])
        self.usage = client.usage
        if stream is not None:
            self._streamed = stream.wait()
        if self.all_failed:
            first = next((e for e in self.samples["error"] if e), "")
            note = (f"Every call failed after its retries ({len(self.samples)} of {len(self.samples)} items): "
                    "no metric has a value (see show_failures() and the `error` column of samples.csv).")
            print(f"Note: {note}\nFirst error: {first}")
            self.notes.append(note)
        return self.counts()

    def _logprobs(self, client: Any, desc: str) -> list[Any]:
        """The first answer token's log-probabilities per item; an endpoint that answers without any
        is an `EndpointError` (it cannot be scored this way), naming it."""
        results = client.generate(self.logprob_requests, desc=desc)
        answered = [r for r in results if not r.failed]
        if answered and all(r.logprobs is None for r in answered):
            raise EndpointError(
                f"{client.base_url} (model {client.model}) returned no log-probabilities on the "
                f"{self.config.api} endpoint for any of {len(answered)} answers: scoring={self.scoring!r} "
                "needs a server that returns them (OpenAI, vLLM, llama.cpp's llama-server); use scoring='text'")
        self.logprob_results = list(results)
        return self.logprob_results

    @property
    def _json_schema(self) -> Any:
        """The JSON schema a reply must meet when the answers are asked as JSON (chat only), else None."""
        schema = getattr(self.task, "json_schema", None)
        return schema if schema is not None and self.config.api == "chat" else None

    def _json_ask(self) -> tuple[list[Any], dict[str, Any]]:
        """(the chats, `ask_json`'s arguments) of the JSON answers: the one recipe sent and planned.
        A repeat's own seed goes with its calls (else every repeat would be one call); the run's seed
        is not sent, as before repeats existed, so a run's cached JSON answers stay its own."""
        c = self.config
        seeds = [q.seed if q.seed != c.seed else None for q in self.requests]
        return ([r.messages for r in self.requests],
                {"schema": dict(self.task.json_schema), "max_tokens": self.max_tokens,
                 "temperature": c.temperature, "name": "entities",
                 **({"seeds": seeds} if any(s is not None for s in seeds) else {})})

    def _json_answers(self, client: Any, desc: str) -> list[Any]:
        """Token classification: one JSON object per item through the structured-output chain
        (json_schema -> json_object -> text, as the judges ask), as generation results."""
        messages, args = self._json_ask()
        return as_results(ask_json(client, messages, **args, desc=desc))

    @property
    def all_failed(self) -> bool:
        """Items were run and not one call succeeded (infrastructure failures after retries)."""
        s = self.samples
        return s is not None and len(s) > 0 and bool(s["failed"].astype(bool).all())

    def counts(self) -> pd.DataFrame:
        s = self.samples
        assert s is not None, "run generate() first"
        counts = {
            "items": int(s["doc_id"].nunique()) if len(s) else 0,
            **({"answers asked (items × repeats or option orders)": len(s)} if len(self.items) != len(self.base_items)
               else {}),
            "answered": int((~s["failed"]).sum()),
            "unparsed (scored wrong)": int(s["unparsed"].sum()),
            "failed (excluded)": int(s["failed"].sum()),
            "truncated at max_tokens": int(s["truncated"].astype(bool).sum()) if "truncated" in s else 0,
            "from cache": int(self.usage.cache_hits),
            "requests sent": int(self.usage.requests),
        }
        if self.level == "all":  # the span call's own counts beside the binary call's
            spans_n = tasks.span_counts(s)
            counts.update({"span replies unparsed (scored as misses)": spans_n["n_unparsed"],
                           "span calls failed (excluded)": spans_n["n_failed"]})
        if self.level != "binary":
            spans_n = tasks.span_counts(s)
            counts.update({"spans predicted": spans_n["n_spans"], "spans not in the answer": spans_n["spans_not_in_text"]})
        return pd.DataFrame({"count": pd.Series(counts, dtype="int64")})

    # -- judge --------------------------------------------------------------------------------
    def _panel(self, progress: bool = True) -> Any:
        return self.judge_panel(self.task.judge_kind, progress=progress)

    def _judge_stream(self, client: Any) -> Any:
        """A JudgeStream for generate() when this task is judged, judges are set and the model
        client hands results on as they arrive; None otherwise (judge() then does all the calls)."""
        import inspect

        from evekit.judges.stream import JudgeStream

        self._streamed = None
        if self.task.judge_kind is None or not self.config.judge_specs() or not self.requests:
            return None
        if "on_result" not in inspect.signature(client.generate).parameters:
            return None
        self._stream_panel = self._panel(progress=False)  # the stream shows one bar per judge
        return JudgeStream(self._stream_panel, len(self.requests))

    def _judge_case(self, position: int, result: Any) -> Any:
        """What the judges get for the item at `position`, or None: a failed call, or an answer that
        is unparsed or empty (FAIL by rule, the same rule as `judge`)."""
        from evekit import judges as judging

        if result.failed:
            return None
        item, answer = self.items[position], result.text or ""
        if not answer.strip() or self.task.parse(answer, item).reason is not None:
            return None
        return judging.JudgeCase(**tasks.judge_case_fields(self.task, item, answer))

    def judge(self) -> pd.DataFrame | None:
        """Ask every judge about every answered item; a judge that fails on one abstains there."""
        from evekit import judges as judging

        if self.task.judge_kind is None:  # only the generic custom-task notebook has this cell then
            print(f"A {self.task.kind} task is scored without judges.")
            return None
        specs = self.config.judge_specs()
        if not specs:
            self.notes.append("No judges configured: only the reference metrics (BLEU, ROUGE-L) are reported.")
            print(self.notes[-1])
            return None
        assert self.samples is not None, "run generate() first"
        if self.answered.empty:
            print("No answered items (every call failed): nothing to judge.")
            return None
        answered = self.answered
        names = [s.name for s in specs]
        # One rule for unusable answers: scored wrong, counted, not sent to the judges.
        by_rule = answered["unparsed"].astype(bool) | (answered["filtered_resps"].fillna("").str.strip() == "")
        sent = answered[~by_rule]
        streamed = getattr(self, "_streamed", None)
        if streamed is not None and all(set(sent.index) <= set(streamed[n]) for n in names):
            # generate() judged every answer as it arrived: only the table is left to build.
            panel = self._stream_panel
            judged = panel.frame({n: [streamed[n][i] for i in sent.index] for n in names})
        else:
            panel = self._panel()
            by_id = {it.doc_id: it for it in self.items}
            cases = [judging.JudgeCase(**tasks.judge_case_fields(self.task, by_id[d], r))
                     for d, r in zip(sent["doc_id"], sent["filtered_resps"])]
            judged = panel.judge(cases)
        judged.index = sent.index
        verdicts = self._with_rule_verdicts(judged, answered.index[by_rule.to_numpy()], names)
        self.samples = self.samples.join(verdicts.reindex(answered.index))
        self.judge_names = names
        self.judge_usage = panel.usage
        return verdicts.reindex(answered.index)

    def _with_rule_verdicts(self, judged: pd.DataFrame, rule_index: pd.Index, names: list[str]) -> pd.DataFrame:
        """The judges' verdicts plus FAIL by rule (judge_<name> = 0.0, method "rule", the reason in
        judge_<name>_reasoning) on `rule_index`; the vote columns recomputed over both. Rule rows
        leave judge_agreement empty: the judges gave no opinion to agree on."""
        from evekit import judges as judging

        kind = judging.get_kind(self.task.judge_kind)
        from evekit.judges.panel import flag_columns

        per_judge = [c for c in judging.judge_columns(names, kind) if any(
            c == f"judge_{n}" or c.startswith(f"judge_{n}_") for n in names)]
        per_judge += [c for c in flag_columns(names) if c in judged.columns]
        rule = pd.DataFrame(index=rule_index)
        for n in names:
            rule[f"judge_{n}"] = 0.0
            rule[f"judge_{n}_reasoning"] = RULE_REASON
            rule[f"judge_{n}_raw"] = None
            rule[f"judge_{n}_error"] = None
            rule[f"judge_{n}_method"] = RULE_METHOD
            rule[f"judge_{n}_flag"] = None
        parts = [p for p in (judged[per_judge], rule[per_judge]) if len(p)]
        both = pd.concat(parts) if parts else judged[per_judge]
        both = both.astype({f"judge_{n}": float for n in names}).sort_index()
        out = judging.add_vote_columns(both, names, reduce=kind.reduce, binary=kind.binary)
        out.loc[out.index.isin(rule_index), "judge_agreement"] = float("nan")
        return out

    @property
    def judged_by_panel(self) -> pd.DataFrame:
        """Answered samples the judges saw (those FAIL by rule left out): for agreement between judges."""
        answered = self.answered
        if not self.judge_names:
            return answered
        rule = answered[f"judge_{self.judge_names[0]}_method"] == RULE_METHOD
        return answered[~rule]

    def judge_summary(self) -> pd.DataFrame | None:
        """Per judge: passes, fails, pass rate, abstentions with their reasons and how its verdicts
        were obtained; with `judge_validation`, its validated accuracy and kappa (a warning when
        kappa < 0.4), and a note when a judge is the embedded demo model."""
        from evekit.judges.verdicts import abstention_reasons, reasons_text

        s = self.samples
        assert s is not None
        if not self.judge_names:
            return None
        rows = []
        for name in self.judge_names:
            col = s[f"judge_{name}"]
            answered = ~s["failed"]
            method = s.loc[answered, f"judge_{name}_method"].dropna()
            passed, failed = int((col == 1).sum()), int((col == 0).sum())
            rows.append({
                "judge": name,
                "PASS": passed,
                "FAIL": failed,
                "pass rate": f"{passed / (passed + failed):.1%}" if passed + failed else MISSING,
                "abstained": int((col.isna() & answered).sum()),
                "abstention reasons": reasons_text(abstention_reasons(s.loc[answered, f"judge_{name}_error"]))
                or MISSING,
                "FAIL by rule (unparsed)": int((method == RULE_METHOD).sum()),
                "verdicts via": ", ".join(f"{k}: {v}" for k, v in method.value_counts().items()) or "–",
            })
        table = pd.DataFrame(rows).set_index("judge") if rows else pd.DataFrame()
        trust = self.judge_trust()
        if trust is not None:
            from evekit.judges.validation import trust_columns

            table = table.join(trust_columns(trust))
        for note in self._judge_notes(trust):
            print(f"Note: {note}")
        return table

    def judge_trust(self) -> pd.DataFrame | None:
        """The judges' validated accuracy and kappa from `judge_validation` (None when not set)."""
        if not self.config.judge_validation or not self.judge_names:
            return None
        from evekit.judges.validation import judge_trust

        return judge_trust(resolve_path(self.config.judge_validation), self.judge_names, kind=self.task.judge_kind)

    def _majority_label_share(self) -> float | None:
        """How often the validation's most common expert label occurs: the accuracy of a judge
        that always gives it (a trust flag's bar, `cards.judge_flags`)."""
        try:
            share = json.loads(resolve_path(self.config.judge_validation).read_text()).get("majority_label_share")
        except (OSError, ValueError, AttributeError):
            return None
        return float(share) if isinstance(share, (int, float)) else None

    def _judge_notes(self, trust: pd.DataFrame | None = None) -> list[str]:
        """Warnings about the judges (validated kappa below 0.4, not validated, demo model), also
        kept for results.json."""
        from evekit.judges.validation import trust_warnings

        notes = [f"Warning: {w}" for w in (trust_warnings(trust) if trust is not None else [])]
        if self.demo_judges:
            notes.append(demo_judge_note(self.demo_judges))
        for note in notes:
            if note not in self.notes:
                self.notes.append(note)
        return notes

    def judge_agreement(self) -> pd.DataFrame | None:
        """Pairwise raw agreement (upper) and Cohen's kappa (lower) between judges, plus Fleiss' kappa."""
        from evekit import judges as judging

        if len(self.judge_names) < 2:
            print("Agreement needs at least two judges.")
            return None
        answered = self.judged_by_panel  # verdicts by rule are no opinion to agree on
        agreement = judging.agreement_matrix(answered, self.judge_names)
        kappa = judging.cohen_kappa_matrix(answered, self.judge_names)
        fk = (self.metrics or self.compute_metrics()).get("fleiss_kappa", {})
        fleiss = fk.get("value")
        ci = (f" [95% CI {fk['ci_low']:.3f}, {fk['ci_high']:.3f}]"
              if fleiss is not None and pd.notna(fleiss) and pd.notna(fk.get("ci_low")) else "")
        print(f"Fleiss' kappa over {len(self.judge_names)} judges: "
              f"{'n/a' if fleiss is None or pd.isna(fleiss) else format(fleiss, '.3f')}{ci}")
        notes = [fk["note"]] if fk.get("note") else []
        pairs = judging.pairwise_agreement(answered, self.judge_names, seed=self.config.seed)
        notes += [f"{r.judge_a} vs {r.judge_b}: {r.note}" for r in pairs.itertuples() if r.note]
        for note in notes:
            print(f"Note: {note}")
        table = agreement.round(3).astype(object)
        for i, a in enumerate(self.judge_names):
            for j, b in enumerate(self.judge_names):
                if i > j:
                    k = kappa.loc[a, b]
                    table.loc[a, b] = f"κ={k:.3f}" if pd.notna(k) else "κ=n/a"
        table.index.name = "agreement ↗ / kappa ↙"
        return table

    # -- metrics ------------------------------------------------------------------------------
    def compute_metrics(self) -> dict[str, dict]:

        assert self.samples is not None, "run generate() first"
        self.metrics = self._metrics_of(self.samples)
        self.corrections = self._corrections()
        self.metrics.update(self.corrections.get("metrics", {}))
        for note in self.corrections.get("notes", []):
            if note not in self.notes:
                self.notes.append(note)
        for m in self.metrics.values():  # an undefined value (null in results.json) says why
            if m.get("note") and m["note"] not in self.notes:
                self.notes.append(m["note"])
        return self.metrics

    def _metrics_of(self, samples: pd.DataFrame) -> dict[str, dict]:
        """The task's metrics, then the judges', over `samples` (all of them, or one group)."""
        from evekit import judges as judging

        design, seed = self.design, self.config.seed
        permuted = "permutation" in samples
        primary = samples[samples["permutation"] == 0] if permuted else samples
        if self.level != "binary":  # the binary level's metrics (at "all"), then the spans'
            out = dict(tasks.task_metrics(self.binary_task, primary, seed=seed)) if self.level == "all" else {}
            out.update(tasks.span_metrics(primary, self.level, seed=seed))
            return out
        out = dict(tasks.task_metrics(self.task, primary, seed=seed, design=design))
        if permuted:
            out.update(self._robustness_metrics(samples))
        if self.judge_names:
            answered = primary[~primary["failed"].astype(bool)]
            out.update(judging.judge_metrics(answered, self.judge_names, seed=seed, design=design))
            rule = answered[f"judge_{self.judge_names[0]}_method"] == RULE_METHOD
            if rule.any() and len(self.judge_names) > 1:  # agreement: only where the judges gave an opinion
                opinion = judging.judge_metrics(answered[~rule], self.judge_names, seed=seed, design=design)
                out.update({k: opinion[k] for k in ("judge_agreement", "fleiss_kappa") if k in opinion})
        return out

    def _robustness_rows(self, samples: pd.DataFrame) -> list[dict[str, Any]]:
        """`evekit.robustness`'s rows: per answer its item, option order, correctness and the
        options it chose (by their original index), and the letters as shown."""
        by_row = {(it.doc_id, it.fields["permutation"]): it for it in self.items}
        rows = []
        for rec in samples.to_dict("records"):
            item = by_row[(rec["doc_id"], rec["permutation"])]
            labels, order = item.fields["labels"], item.fields["order"]
            answer = rec["parsed"] if isinstance(rec.get("parsed"), str) and not rec["unparsed"] else None
            rows.append({"item": rec["doc_id"], "permutation": rec["permutation"], "failed": bool(rec["failed"]),
                         "correct": rec["acc"], "chosen": robustness.chosen_options(answer, labels, order),
                         "labels": labels, "answer": answer, "gold": item.fields["gold"],
                         **({"cluster": rec[tasks.CLUSTER_COLUMN]} if tasks.CLUSTER_COLUMN in rec else {})})
        return rows

    def _robustness_metrics(self, samples: pd.DataFrame) -> dict[str, dict]:
        """robust_acc (right under every option order), consistency (the same option, by content,
        under every order), acc per order; with cluster_by their intervals resample clusters."""
        rows = self._robustness_rows(samples)
        out = robustness.robustness_metrics(rows, self.config.permutations)
        if self.config.cluster_by:
            per_item = pd.DataFrame(robustness.item_robustness(rows, self.config.permutations))
            cluster = {r["item"]: r.get("cluster") for r in rows}
            per_item["cluster"] = per_item["item"].map(cluster)
            design = repeats.Design(item_column="item", cluster_column="cluster")
            for name in ("robust_acc", "consistency"):
                used = per_item.dropna(subset=[name])
                out[name] = {**design.interval(used, name, kind="proportion"),
                             "n_excluded": len(per_item) - len(used)}
        return out

    def design_table(self) -> pd.DataFrame | None:
        """With repeats or clusters: per metric its repeat-aware interval, the items and answers
        behind it, the design effect, the within-item (run-to-run) and between-item variances of one
        answer (`var_within`, `var_between`; Miller 2024 section 4) and the shares of the interval's
        variance due to run-to-run noise (more repeats shrink it) and to which items were drawn
        (only more items do), and the
        half-width one would expect with twice the repeats or twice the items (Miller 2024). With
        permutations: robust accuracy, consistency and accuracy under each option order. None (and
        a line saying how to ask for it) otherwise."""
        c = self.config
        if self.design is None and not c.permutations:
            print("One answer per item, no clusters, no shuffled options: set repeats, cluster_by or "
                  "permutations to see run-to-run variance, clustered intervals or robust accuracy.")
            return None
        metrics = self.metrics or self.compute_metrics()
        rows: dict[str, dict[str, Any]] = {}
        for name, m in metrics.items():
            if c.permutations and (name in ("robust_acc", "consistency") or name.startswith("acc_permutation_")):
                rows[name] = {k: m.get(k) for k in ("value", "ci_low", "ci_high", "n", "method")}
            elif self.design is not None and "n_answers" in m:
                row = {k: m.get(k) for k in ("value", "ci_low", "ci_high", "n", "n_answers", "n_clusters",
                                              "design_effect", "var_within", "var_between", "share_within",
                                              "share_between", "method")}
                if c.repeats > 1 and pd.notna(m.get("var_within")):
                    row["± now"] = (m["ci_high"] - m["ci_low"]) / 2
                    row["± with 2× repeats"] = repeats.projected_interval(m, repeats=2 * m["repeats"])["half_width"]
                    row["± with 2× items"] = repeats.projected_interval(m, items=2 * m["n"])["half_width"]
                rows[name] = row
        table = pd.DataFrame.from_dict(rows, orient="index").dropna(axis=1, how="all")
        table.index.name = "metric"
        for count in ("n", "n_answers", "n_clusters"):
            if count in table:
                table[count] = table[count].astype("Int64")
        return _why_missing(shown(table.round(4)), METRIC_MISSING)

    def position_preference(self) -> pd.DataFrame | None:
        """How often each option position is answered against how often the gold is there, over every
        option order (None without permutations): a letter-position bias shows as the two far apart."""
        if self.samples is None or "permutation" not in self.samples:
            return None
        pref = robustness.position_preference(self._robustness_rows(self.samples))
        return pd.DataFrame(pref["table"]).set_index("position")

    def _corrections(self) -> dict[str, Any]:
        """Each judged score corrected by the expert labels (PPI++), else, with a judge validation,
        by its validated error rates (Rogan–Gladen); {} when neither applies."""
        from evekit.runs.task import corrected

        c = self.config
        if not self.judge_names or self.samples is None or self.answered.empty:
            return {}
        primary = self.primary
        if c.expert_labels:
            return corrected.expert_corrections(primary, resolve_path(c.expert_labels), self.judge_names,
                                                group_by=c.group_by)
        if c.judge_validation and self.task.judge_kind is not None:
            return corrected.validation_corrections(primary, resolve_path(c.judge_validation), self.judge_names,
                                                    seed=c.seed)
        return {}

    def corrected_scores(self) -> pd.DataFrame | None:
        """Each judged score beside its correction: raw (the judges alone), corrected (PPI++ from
        the expert labels, or Rogan–Gladen from the judge validation), labels only; the width ratio,
        the effective number of labels and the labels that would halve the interval; then the
        judges' agreement with the labels on this task's items. Also drawn (corrected.png).
        None, with a line saying how to get them, when there is nothing to correct with."""
        table = self._corrected_table()
        if table is None:
            print("No judge-corrected score: set expert_labels (a sheet from `evekit label sample`) or "
                  "judge_validation to correct the judges' scores for their errors.")
            return None
        agreement = self.corrections.get("agreement")
        if agreement:
            from IPython.display import display

            display(_why_missing(shown(table.round(4)), METRIC_MISSING))
            return shown(self.label_agreement().round(4))
        return _why_missing(shown(table.round(4)), METRIC_MISSING)

    def label_agreement(self) -> pd.DataFrame | None:
        """The judges (and their vote) against the expert labels on this task's labelled items:
        accuracy, kappa, sensitivity, specificity with their intervals; with `judge_validation`, the
        validation set's accuracy and kappa beside them (validated_*), so a judge that did well
        there and badly here (or the reverse) shows. None without expert labels."""
        from evekit.runs.task import corrected

        if not self.metrics:
            self.compute_metrics()
        agreement = self.corrections.get("agreement")
        if not agreement:
            return None
        table = pd.DataFrame(agreement).set_index("judge")
        if self.config.judge_validation:
            table = corrected.with_validated(table, resolve_path(self.config.judge_validation), kind=self.task.judge_kind)
            print("The judges against the expert labels on this task's labelled items (validated_*: on the judge "
                  f"validation {display_path(resolve_path(self.config.judge_validation))}):")
        else:
            print("The judges against the expert labels on this task's labelled items:")
        for count in ("n", "abstained", "validated_n"):
            if count in table:
                table[count] = pd.to_numeric(table[count]).astype("Int64")
        return table

    def _corrected_table(self) -> pd.DataFrame | None:
        metrics = self.metrics or self.compute_metrics()
        fixed = dict(self.corrections.get("metrics", {}))
        if not fixed:
            return None
        rows = {}
        for name, m in fixed.items():
            raw = metrics.get(m["raw"], {})
            rows[f"{m['raw']} (raw)"] = {k: raw.get(k) for k in ("value", "ci_low", "ci_high", "n", "method")}
            rows[name] = {k: m.get(k) for k in ("value", "ci_low", "ci_high", "n", "n_labels", "method",
                                                "width_ratio", "effective_labels", "labels_to_halve", "assumption")}
            alone = m.get("labels_only")
            if alone:
                rows[f"{m['raw']} (labels only)"] = {k: alone.get(k) for k in ("value", "ci_low", "ci_high", "n",
                                                                                "method")}
        table = pd.DataFrame.from_dict(rows, orient="index").dropna(axis=1, how="all")
        table.index.name = "score"
        for count in ("n", "n_labels", "labels_to_halve"):
            if count in table:
                table[count] = pd.to_numeric(table[count]).astype("Int64")
        return table

    def baselines(self) -> dict[str, dict] | None:
        """Chance and the best constant answer on the items answered (tasks with a gold label)."""
        assert self.samples is not None, "run generate() first"
        primary = self.primary
        if "repeat" in primary:  # chance and the constant answer need each item once
            primary = primary[primary["repeat"] == 0]
        return tasks.baselines(self.task, self.base_items, primary)

    def span_baselines(self) -> dict[str, dict[str, dict]] | None:
        """The span metrics of "no span" and "the whole answer is hallucinated" on the items scored
        (span levels only)."""
        if self.level == "binary" or self.samples is None:
            return None
        return tasks.span_baselines(self.samples, self.level, seed=self.config.seed)

    def span_view(self, k: int = 5) -> Any:
        """The k items with the lowest hard_iou: each answer with the gold and the predicted spans
        side by side (marks over escaped text). None at the binary level."""
        if self.level == "binary":
            print('level="binary": no spans asked (set level to "hard_spans", "soft_spans" or "all").')
            return None
        from IPython.display import HTML

        html = tasks.worst_spans_html(self.samples, k)
        return HTML(html) if html else print("No item with a span score (every span call failed).")

    def choices_only_baseline(self) -> dict[str, Any] | None:
        """acc with the question withheld (`choices_only`): how much of the score the options alone
        explain. None when not asked for."""
        if self.choices_only_samples is None:
            return None
        acc = tasks.task_metrics(self.task, self.choices_only_samples, seed=self.config.seed).get("acc")
        return None if acc is None else {**acc, "note": "the options alone: the question withheld"}

    def metrics_table(self) -> pd.DataFrame:
        """Metrics with their interval (and its method); for tasks with a gold label also the rows
        `acc (chance)` and `acc (always "X")`, and a note when the model does not beat them."""
        metrics = self.metrics or self.compute_metrics()
        rows = dict(metrics)
        base = self.baselines()
        if base:
            constant = base["most_frequent"]
            rows["acc (chance)"] = dict(base["chance"])
            rows[f'acc (always "{constant["answer"]}")'] = {k: v for k, v in constant.items() if k != "answer"}

            note = tasks.baseline_note(metrics, base)
            if note:
                print(f"Note: {note}")
                if note not in self.notes:
                    self.notes.append(note)
        alone = self.choices_only_baseline()
        if alone:
            rows["acc (choices only)"] = {k: v for k, v in alone.items() if k != "note"}
        for name, scores in (self.span_baselines() or {}).items():
            for metric, summary in scores.items():
                rows[f"{metric} ({name.replace('_', ' ')})"] = summary
        table = pd.DataFrame.from_dict(rows, orient="index")
        # The design's details (variance shares, design effect, ...) are design_table()'s.
        table = table.drop(columns=[c for c in DESIGN_DETAILS if c in table])
        # A corrected score's details (its labels-only and judge-only estimates, lambda, width ratio)
        # are corrected_scores()'s; here they would be a Python dict in a cell.
        nested = [c for c in table if table[c].map(lambda v: isinstance(v, dict)).any()]
        table = table.drop(columns=nested + [c for c in CORRECTION_DETAILS if c in table])
        table.index.name = "metric"
        for count in ("n", "n_informative", "n_boot", "n_defined", "n_answers", "n_clusters"):  # counts, never 26.0
            if count in table:
                table[count] = table[count].astype("Int64")
        # "–" where a number does not apply (the method column says why), never a bare NaN.
        return _why_missing(shown(table.round(4)), METRIC_MISSING)

    # -- groups -------------------------------------------------------------------------------
    def by_group(self) -> pd.DataFrame | None:
        """Every metric per value of the `group_by` column (value, interval, n), and a forest plot
        of the headline metric per group (saved as by_group.png). None when group_by is not set."""
        if not self.config.group_by:
            print("no group_by set: no breakdown by group")
            return None
        assert self.samples is not None, "run generate() first"
        self.group_table = tasks.metrics_by_group(self.samples, self._metrics_of)
        title = f"{self.config.task} · {self.name}"
        headline = self.headline
        self.figures[GROUP_PLOT] = plots.show(plots.group_breakdown(
            self.group_table, headline, group_by=self.config.group_by, title=title,
            overall=self.metrics.get(headline, {}).get("value")))
        return _why_missing(shown(self.group_table.round(4)), METRIC_MISSING)

    def _group_extra(self) -> dict[str, Any] | None:
        if not self.config.group_by:
            return None
        table = self.group_table if self.group_table is not None else tasks.metrics_by_group(self.samples, self._metrics_of)
        groups: dict[str, dict] = {}
        for row in table.to_dict("records"):
            groups.setdefault(str(row["group"]), {})[row["metric"]] = {k: row[k] for k in
                                                                       ("value", "ci_low", "ci_high", "n", "method")}
        return {"column": self.config.group_by, "groups": groups}

    # -- tables and plots ---------------------------------------------------------------------
    def show_failures(self, n: int = 10) -> None:
        """Unparsed answers (the model's fault, scored wrong) and failed calls (excluded), with reasons."""
        from IPython.display import display

        s = self.samples
        assert s is not None
        for label, mask, cols in (
            ("unparsed answers (scored wrong)", s["unparsed"], ["doc_id", "filtered_resps", "unparsed_reason"]),
            ("failed calls (excluded from the metrics)", s["failed"], ["doc_id", "error"]),
        ):
            total = int(mask.sum())
            shown = min(n, total)
            print(f"{total} {label}" + (f" (showing {shown} of {total}):" if shown < total else
                                         ":" if total else ""))
            if total:
                display(_full_text(s.loc[mask.astype(bool), cols].head(n)))

    def failing(self) -> pd.DataFrame:
        """Answered items the model failed, worst first: the headline metric's per-item value below
        its maximum (1: a 0 of a 0/1 metric, judge_voting 0 for judged tasks; a corpus headline
        such as f1 uses the per-item `acc`, micro_f1 the per-item `entity_f1`), and every unparsed answer."""
        s = self.samples
        assert s is not None, "run generate() first"
        answered = self.answered
        key = tasks.metric_column(self.headline, self.judge_names)
        if key not in s.columns:
            # A corpus headline: a per-item score that says which items went wrong.
            key = next((c for c in ("acc", "entity_f1") if c in s.columns), None)
        unparsed = answered["unparsed"].astype(bool)
        if key is None:
            return answered[unparsed]
        values = pd.to_numeric(answered[key], errors="coerce")
        failing = answered[unparsed | (values < 1.0)]
        return failing.sort_values(key, kind="stable", na_position="first")

    def worst(self, n: int = 5) -> FullText | None:
        """The failing items (`failing`), to read rather than to count: question, target, the answer
        in full, what was parsed, the per-item score, whether the answer was cut off at max_tokens
        and, for judged tasks, each judge's rationale. None (and a sentence) when nothing failed."""
        s = self.samples
        assert s is not None
        if self.answered.empty:
            print("No answered items: every call failed (see show_failures()).")
            return None
        failing = self.failing()
        if failing.empty:
            print(f"No failing items: every one of the {len(self.answered)} answered items got the top score.")
            return None
        key = tasks.metric_column(self.headline, self.judge_names)
        # An item asked several times (repeats, option orders) shows which time each row is.
        shown = ["doc_id", *(c for c in ("repeat", "permutation") if c in s.columns), "doc.Question", "target",
                 "filtered_resps"]
        extra = [c for c in ("doc.Choices", "doc.Answer", "parsed", "unparsed_reason", key, "acc", "entity_f1",
                             "truncated")
                 if c in s.columns and c not in shown]
        extra += [f"judge_{j}_reasoning" for j in self.judge_names if f"judge_{j}_reasoning" in s.columns]
        total, k = len(failing), min(n, len(failing))
        unit = "answers" if len(self.items) != len(self.base_items) else "items"
        caption = (f"showing {k} of {total} failing {unit}" if k < total else f"{total} failing {unit[:-1]}(s)")
        print(caption)
        return _full_text(failing[shown + list(dict.fromkeys(extra))].head(n), caption)

    def explorer(self) -> Any:
        """Every item, sortable, searchable and filterable by outcome (correct, wrong, unparsed,
        failed, truncated, judges disagree, abstained), by `group_by` and by the metric it fails; a
        row opens into its whole story: the messages sent (few-shot collapsed), the raw reply, the
        parsed answer, gold, choices or documents, each judge's verdict and rationale, scores,
        finish_reason, tokens, error (`evekit.explorer`)."""
        from evekit.explorer import task_explorer

        assert self.samples is not None, "run generate() first"
        metrics = self.metrics or self.compute_metrics()
        return task_explorer(self.samples, self.model_outputs(), judges=self.judge_names, headline=self.headline,
                             metrics=metrics, group_by=self.config.group_by, metric_column=tasks.metric_column,
                             title=f"{self.config.task} \u00b7 {self.name}")

    @property
    def headline(self) -> str:
        """The metric this run is summarised by (`evekit.tasks.headline_metric`)."""
        metrics = self.metrics or self.compute_metrics()
        return tasks.headline_metric(self.task, list(metrics)) or self.task.metrics[0]

    def plots(self) -> dict[str, Any]:
        """Figures for this task; each is shown and saved as PNG by save()."""
        s = self.samples
        assert s is not None
        figs: dict[str, Any] = {}
        if self.answered.empty:
            print("Plots skipped: no answered items (every call failed), nothing to draw.")
            self.figures = figs
            return figs
        title = f"{self.config.task} · {self.name}"
        for spec in self.task.plots:
            if not (spec.without_judges and self.judge_names):
                figs[spec.file] = plots.TASK_PLOTS[spec.recipe](s, self.task, spec.metric, title)
        if self.judge_names:
            figs["judge_pass_rates.png"] = plots.judge_pass_rates(self.metrics, self.judge_names, title=title)
            if len(self.judge_names) > 1:
                from evekit import judges as judging

                figs["judge_agreement.png"] = plots.heatmap(
                    judging.cohen_kappa_matrix(self.answered, self.judge_names),
                    title=f"Cohen's kappa between judges · {title}", vmin=-1, vmax=1, cmap="RdBu",
                    empty=self._why_no_kappa).figure
        corrected = self._corrected_table()
        if corrected is not None:
            figs["corrected.png"] = plots.corrected_scores(corrected, title=title)
        pref = self.position_preference()
        if pref is not None:
            figs["position_preference.png"] = plots.position_preference(pref, orders=self.config.permutations,
                                                                        title=title)
        for fig in figs.values():
            plots.show(fig)
        if GROUP_PLOT in self.figures:  # drawn (and shown) by by_group(), which may come first
            figs[GROUP_PLOT] = self.figures[GROUP_PLOT]
        self.figures = figs
        return figs

    def _why_no_kappa(self, a: str, b: str) -> str:
        """A blank cell of the kappa heatmap in words: no item both judges voted on, or one verdict
        given by both throughout (chance agreement 1: kappa undefined)."""
        x, y = (pd.to_numeric(self.answered[f"judge_{n}"], errors="coerce") for n in (a, b))
        both = x.notna() & y.notna()
        if not both.any():
            return "no item\nboth voted on"
        said = {1.0: "PASS", 0.0: "FAIL"}.get(float(x[both].iloc[0]), str(x[both].iloc[0]))
        return f"undefined:\nboth said\n{said} throughout"

    # -- save ---------------------------------------------------------------------------------
    def _judge_extra(self) -> dict[str, Any] | None:
        from evekit import judges as judging

        if not self.judge_names:
            return None
        assert self.samples is not None
        counts = judging.judge_counts(self.answered, self.judge_names)
        rule = self.answered[f"judge_{self.judge_names[0]}_method"] == RULE_METHOD
        from evekit.judges.verdicts import abstention_reasons

        counts["abstention_reasons"] = {n: abstention_reasons(self.answered[f"judge_{n}_error"])
                                        for n in self.judge_names}
        extra: dict[str, Any] = {"judges": self.judge_names, "n_judge_failed": counts["n_judge_failed"],
                                 "n_judge_rule": int(rule.sum()), "judge_counts": counts,
                                 "demo_judges": self.demo_judges}
        trust = self.judge_trust()
        if trust is not None:
            extra["judge_trust"] = {"validation": self.config.judge_validation, "judges": trust.to_dict("records"),
                                    "majority_label_share": self._majority_label_share()}
        self._judge_notes(trust)
        return extra

    def _extra(self) -> dict[str, Any]:
        """results.json keys beyond the metrics: judges, `baselines`, `by_group`."""
        extra = dict(self._judge_extra() or {})
        extra["n_items"] = len(self.base_items)  # `n` counts rows: k per item under repeats
        if getattr(self, "n_available", 0) > len(self.base_items):
            extra["n_available"] = self.n_available
        base = self.baselines()
        if base:
            extra["baselines"] = base
            note = tasks.baseline_note(self.metrics, base)
            if note and note not in self.notes:
                self.notes.append(note)
        groups = self._group_extra()
        if groups:
            extra["by_group"] = groups
        alone = self.choices_only_baseline()
        if alone:
            extra["choices_only"] = alone
        if self.corrections.get("agreement"):
            extra["expert_labels"] = {"sheet": self.config.expert_labels, "n_labels": self.corrections["n_labels"],
                                      "agreement": self.corrections["agreement"]}
        if self.config.permutations:
            pref = self.position_preference()
            if pref is not None:
                extra["position_preference"] = pref.reset_index().to_dict("records")
        if self.level != "binary":
            extra["level"] = self.level
            extra["span_max_tokens"] = self.span_max_tokens
            extra["span_counts"] = tasks.span_counts(self.samples)
            extra["span_baselines"] = self.span_baselines()
        design = self.design
        if design is not None or self.config.permutations:
            c = self.config
            extra["design"] = {"repeats": c.repeats, "repeat_over": c.repeat_over if c.repeats > 1 else None,
                               "reducer": c.reducer, "cluster_by": c.cluster_by, "permutations": c.permutations,
                               "fewshot_split": c.fewshot_split}
        return extra

    def save(self) -> Path:
        assert self.samples is not None
        if not self.metrics:
            self.compute_metrics()
        c = self.config
        usage = self.usage.add(self.judge_usage).as_dict()
        usage["seconds"] = round(time.monotonic() - self._started, 3)
        params = {**c.as_dict(), "num_fewshot": self.num_fewshot, "max_tokens": self.max_tokens,
                  "dataset": self.dataset}
        extra = self._extra()  # before the notes: it may add the baselines' note
        results = build_results(
            task=c.task, model=c.model_name, samples=self.samples, metrics=self.metrics,
            usage=usage, params=params, notes=self.notes + [TINY_MODEL_NOTE] if self.is_demo_model else self.notes,
            extra=extra,
        )
        out = write_run(c.out_dir, self.samples, results, dataset=self.dataset, figures=self.figures,
                               outputs=self.model_outputs())
        print(f"Saved outputs to {display_path(out)}")
        return out

    def _span_record(self, i: int) -> dict[str, Any]:
        """At every span level, the span call's reply and spans: `span_response`, `pred_spans`
        ([{text, start, end, confidence}], null offsets for a phrase not in the answer),
        `spans_not_in_text`, and the gold and predicted hard/soft labels, as JSON values (samples.csv
        holds them as JSON text). At level "all" also what the span call sent (`span_messages` or
        `span_prompt`); at hard_spans / soft_spans the record's `messages` already are the span question."""
        row = self.samples.iloc[i]
        sent: dict[str, Any] = {}
        if self.level == "all":
            request = self.span_requests[i]
            sent = ({"span_messages": [dict(m) for m in request.messages]} if request.messages is not None
                    else {"span_prompt": request.prompt})
        decoded = {k: _json_cell(row.get(k)) for k in _SPAN_LABELS}
        return {**sent, "span_response": _plain(row.get("span_response")), **decoded,
                "spans_not_in_text": _plain(row.get("spans_not_in_text"))}

    def _first_token_logprobs(self, i: int) -> list[dict[str, Any]] | None:
        res = self.logprob_results[i] if i < len(self.logprob_results) else None
        return getattr(res, "logprobs", None)

    def model_outputs(self) -> list[dict[str, Any]]:
        """One record per item for model_outputs.jsonl: the exact messages (chat) or prompt
        (completions) sent, few-shot examples included; the item's own prompt without them; the
        raw response, the parsed answer, finish_reason, completion_tokens, logprobs (the first answer
        token's top alternatives when `scoring` is logprobs or both, else null) and the item's own fields;
        at a span level also the span reply, the located phrases and the gold and predicted labels
        (`_span_record`)."""
        s = self.samples
        assert s is not None, "run generate() first"
        api = self.config.api
        out = []
        for i, (item, request) in enumerate(zip(self.items, self.requests)):
            row = s.iloc[i]
            sent = ({"messages": [dict(m) for m in request.messages]} if request.messages is not None
                    else {"prompt": request.prompt})
            out.append({
                "doc_id": item.doc_id,
                **{k: item.fields[k] for k in ("repeat", "permutation") if k in item.fields},
                "api": request.api,
                **sent,
                "item_prompt": self.task.item_prompt(item, api),
                "response": _plain(row.get("response")),
                "filtered_resps": _plain(row.get("filtered_resps")),
                "parsed": _plain(row.get("parsed")),
                "unparsed_reason": _plain(row.get("unparsed_reason")),
                "failed": bool(row.get("failed")),
                "error": _plain(row.get("error")),
                "finish_reason": _plain(row.get("finish_reason")),
                "truncated": bool(row.get("truncated")),
                "completion_tokens": _plain(row.get("completion_tokens")),
                "logprobs": self._first_token_logprobs(i),
                **(self._span_record(i) if self.level != "binary" else {}),
                # The dataset's own fields (no file path: it would be machine-specific).
                "item": {"question": item.question, "target": item.target, "row": item.row, **item.fields},
            })
        return out

