"""A small batch of every notebook kind, run for real (`evekit run`'s `run_batch`: papermill, the
notebooks' own cells, nbconvert's report.html, the index) against the stub server, with markup
and script payloads in everything a dataset, a model, a judge or a user's names can carry.
tests/test_browser.py opens it in Chromium; `python tests/browser_batch.py DIR` builds one to look at."""
from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from stub_server import StubServer  # noqa: E402

# Every payload, named by where it is put. Each one, if the page ran it, would call alert() (a
# dialog the test listens for) or set window.__pwned (read on every page).
PAYLOADS = {
    "question <script>": '<script>window.__pwned="question"</script>',
    "question <img onerror>": "<img src=x onerror=\"window.__pwned='question-img'\">",
    "question Markdown": "**bold question** [q](javascript:alert('q-md'))",
    "gold </textarea>": "</textarea><b>gold</b><textarea>",
    "choice <iframe srcdoc>": "<iframe srcdoc=\"<script>parent.__pwned='choice'</script>\"></iframe>",
    "choice javascript: Markdown link": "[choice link](javascript:window.__pwned='choice-md')",
    "choice javascript: <a>": "<a href=\"javascript:window.__pwned='choice-a'\">choice anchor</a>",
    "judge rationale (Markdown + HTML)": ("**bold rationale** <img src=x onerror=alert('rationale')> "
                                          "[r](javascript:alert('r')) <u>underlined</u>"),
    "model_name": "m<img src=x onerror=alert('model')>",
    "model_name (second model)": "b**bold**</textarea>",
    "run_name": "r<script>alert('run')</script>",
    "labelled question": "<svg onload=alert('label')>",
    "labelled answer": "<details open ontoggle=alert('answer')>x</details>",
}
P = PAYLOADS
# The model's reply: the stub echoes the prompt ("echo: ..."), so every question payload is in a reply.
TASK = "open_ended"


def browser_required() -> bool:
    """`make test` sets EVEKIT_REQUIRE_BROWSER=1 where it installs Chromium (root with apt-get, as
    .ci/run is) and CI services set CI: there a missing browser fails the browser tests
    (tests/test_browser.py, tests/test_pages.py) instead of skipping them."""
    return os.environ.get("EVEKIT_REQUIRE_BROWSER", "") not in ("", "0") or bool(os.environ.get("CI"))


@dataclass
class Batch:
    root: Path      # tmp folder: data, params, cache, outputs
    out: Path       # output_dir
    run_dir: Path   # <out>/<safe run_name>
    code: int       # run_batch's exit code


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def build(root: Path, jobs: int = 2, *, named: bool = True) -> Batch:
    """The batch in `root`. `named`: the win rate's and ranking's entries carry `name` (the model's);
    False: only `file`, so they are called by their configuration names (`evekit.naming`)."""
    from evekit import batch
    from evekit.paths import safe_name

    root.mkdir(parents=True, exist_ok=True)
    data = root / "data"
    data.mkdir(exist_ok=True)
    open_ended = write_jsonl(data / "open_ended.jsonl", [
        {"Question": f"What is the orbit altitude of Sentinel-2? {P['question <script>']}",
         "Answer": f"786 km {P['gold </textarea>']}"},
        {"Question": f"What is the revisit time? {P['question <img onerror>']}", "Answer": "5 days"},
        {"Question": f"Which band does Sentinel-1 use? {P['question Markdown']}", "Answer": "C-band"},
        {"Question": "A question whose call fails [[fail]]", "Answer": "nothing"},
    ])
    mcqa = write_jsonl(data / "mcqa_single_answer.jsonl", [
        {"Question": "Which frequency band does Sentinel-1's radar use?",
         "Choices": [P["choice <iframe srcdoc>"], P["choice javascript: Markdown link"],
                     P["choice javascript: <a>"], "C-band"], "Answer": "D", "Mission": "Sentinel-1"},
        {"Question": "What is the nominal orbit altitude of Sentinel-2?",
         "Choices": ["693 km", "786 km", "705 km", "35,786 km"], "Answer": "B", "Mission": "Sentinel-2"},
        {"Question": "Reply with the letter A.", "Choices": ["yes", "no"], "Answer": "A", "Mission": "Sentinel-1"},
    ])
    labels = write_jsonl(data / "labels.jsonl", [
        {"question": f"How many bands? {P['labelled question']}", "reference": "13 bands",
         "answer": P["labelled answer"], "label": 0, "case": "injection"},
        {"question": "How many bands does the MSI have?", "reference": "13 bands", "answer": "13", "label": 1,
         "case": "correct"},
        {"question": "What is the revisit time?", "reference": "5 days", "answer": "10 days", "label": 0,
         "case": "wrong_value"},
    ])
    out = root / "outputs"
    run_name, model_a, model_b = P["run_name"], P["model_name"], P["model_name (second model)"]
    run_dir = out / safe_name(run_name)
    params = root / "params"
    params.mkdir(exist_ok=True)
    with StubServer(verdicts=True, reasoning=P["judge rationale (Markdown + HTML)"]) as stub:
        judges = [{"name": f"j{i}", "model": f"stub-judge-{i}", "base_url": stub.base_url, "api_key_env": None}
                  for i in (1, 2)]
        common = {"run_name": run_name, "output_dir": str(out), "cache_dir": str(root / "cache"), "seed": 7,
                  "max_retries": 0, "timeout": 20, "concurrency": 4}
        task = {**common, "base_url": stub.base_url, "api_key_env": None, "max_tokens": 64, "num_fewshot": 0}

        def samples(model: str) -> str:
            return str(run_dir / safe_name(model) / TASK / "samples.csv")

        def entry(model: str) -> dict:
            return {"name": model, "file": samples(model)} if named else {"file": samples(model)}

        files = {
            "judge_validation.yaml": {**common, "labels": str(labels), "judge_kind": "fact_check", "judges": judges},
            "open_ended.yaml": {**task, "model_name": model_a, "dataset": str(open_ended), "judges": judges},
            # A one-shot completions prompt: its echoed answers differ from model A's (judged, not tied).
            "open_ended.b.yaml": {**task, "model_name": model_b, "dataset": str(open_ended), "judges": judges,
                                  "num_fewshot": 1, "api": "completions"},
            # group_by: the explorer's group filter (tests/test_browser.py) has two groups to show
            "mcqa_single_answer.yaml": {**task, "model_name": model_a, "dataset": str(mcqa), "max_tokens": 8,
                                        "group_by": "Mission"},
            "win_rate.yaml": {**common, "task": TASK, "judges": judges, "both_orders": True,
                              "model_a": [entry(model_a)], "model_b": [entry(model_b)]},
            "ranking.yaml": {**common, "task": TASK, "judges": judges, "both_orders": True, "n_boot": 50,
                             "models": [entry(model_a), entry(model_b)]},
            "summary.yaml": {"run_name": run_name, "output_dir": str(out), "seed": 7},
        }
        for name, values in files.items():
            if "cache_dir" in values:  # one cache each: runs asking the same judge calls do not wait on each other
                values["cache_dir"] = str(root / "cache" / name)
            (params / name).write_text(yaml.safe_dump(values, allow_unicode=True), encoding="utf-8")
        code = batch.run_batch([str(params / n) for n in files], jobs=jobs)
    return Batch(root=root, out=out, run_dir=run_dir, code=code)


if __name__ == "__main__":
    b = build(Path(sys.argv[1]))
    print(b)
