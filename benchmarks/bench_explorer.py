"""A task report of 10,000 items in headless Chromium (issue 29): the item explorer's HTML size and
the time to open it.

The items are synthetic (seeded) but go through the real code: `evekit.explorer.task_explorer` on a
samples table of an open_ended run judged by two judges (question, gold, reply, each judge's
verdict, reasoning and raw reply, scores, finish_reason, tokens; 5% failed, 8% unparsed, 10%
truncated) and model_outputs records with the chat messages sent (a system message, five few-shot
question/answer pairs, the item's question); the widget is the output of a notebook cell, rendered
to report.html by `evekit.batch.html.render_html` (nbconvert, as `evekit run` does). Chromium
(Debian's, through Playwright) opens the file from disk; the time is from navigation to the
explorer's table rendered (its first page of rows in the DOM), in a fresh page each run.

    PYTHONPATH=. .venv/bin/python benchmarks/bench_explorer.py [--items 10000] [--runs 3]

Targets: open < 3 s, report.html < 20 MB. Figures: benchmarks/README.md.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

CHROMIUM = os.environ.get("EVEKIT_CHROMIUM", "/usr/bin/chromium")
WORDS = ("orbit altitude revisit swath band spectral radiometric calibration reflectance SAR polarisation "
         "backscatter interferometry coherence Sentinel Landsat MODIS aerosol cloud mask surface temperature "
         "vegetation index NDVI soil moisture ocean colour chlorophyll albedo ice sheet glacier flood burn "
         "scar land cover classification resolution pixel ground sampling distance nadir incidence angle "
         "ascending descending pass tile granule level product atmospheric correction").split()


def synthetic_run(n: int, seed: int = 0) -> tuple[pd.DataFrame, list[dict]]:
    rng = np.random.default_rng(seed)

    def sentence(k: int) -> str:
        return " ".join(rng.choice(WORDS, size=k)).capitalize()

    failed = rng.random(n) < 0.05
    unparsed = ~failed & (rng.random(n) < 0.08)
    j1 = np.where(rng.random(n) < 0.55, 1.0, 0.0)
    j2 = np.where(rng.random(n) < 0.1, j1 * 0 + (1 - j1), j1)  # disagrees on ~10%
    j1[failed] = j2[failed] = np.nan
    j1[unparsed] = j2[unparsed] = 0.0
    voting = np.where(np.isnan(j1), np.nan, ((j1 + j2) > 1).astype(float))
    questions = [f"{sentence(int(rng.integers(12, 30)))}?" for _ in range(n)]
    replies = [sentence(int(rng.integers(40, 120))) + "." for _ in range(n)]
    reasons = [sentence(int(rng.integers(15, 40))) + "." for _ in range(n)]
    samples = pd.DataFrame({
        "doc_id": np.arange(n), "doc.Question": questions,
        "target": [sentence(int(rng.integers(15, 45))) + "." for _ in range(n)],
        "filtered_resps": np.where(failed, "", replies), "response": np.where(failed, None, replies),
        "reasoning": None, "parsed": None, "unparsed": unparsed,
        "unparsed_reason": np.where(unparsed, "empty answer", None), "failed": failed,
        "error": np.where(failed, "HTTP 500 after 4 retries: Internal server error", None),
        "finish_reason": np.where(rng.random(n) < 0.1, "length", "stop"),
        "completion_tokens": rng.integers(20, 96, n), "truncated": rng.random(n) < 0.1,
        "bleu": rng.random(n) * 30, "rougeL": rng.random(n), "cosine": rng.random(n),
        **{f"judge_{j}{suf}": col for j, v in (("strict", j1), ("sampled", j2)) for suf, col in (
            ("", v), ("_reasoning", reasons), ("_raw", [json.dumps({"reasoning": r, "verdict": int(x) if x == x else None})
                                                     for r, x in zip(reasons, v)]),
            ("_error", None), ("_method", np.where(unparsed, "rule", "json_schema")), ("_flag", None))},
        "judge_voting": voting, "llm_as_judge_avg": (j1 + j2) / 2,
        "judge_agreement": (j1 == j2).astype(float), "judge_n_votes": 2.0, "judge_failed": False,
    })
    shots = []
    for _ in range(5):
        shots += [{"role": "user", "content": f"Question: {sentence(20)}?"},
                  {"role": "assistant", "content": sentence(60) + "."}]
    system = {"role": "system", "content": "Answer the following question about Earth Observation accurately and completely."}
    outputs = [{"doc_id": int(i), "messages": [system, *shots, {"role": "user", "content": f"Question: {q}"}]}
               for i, q in enumerate(questions)]
    return samples, outputs


def build_report(n: int, out_dir: Path) -> tuple[Path, dict]:
    import nbformat
    from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

    from evekit import tasks
    from evekit.batch.html import render_html
    from evekit.explorer import task_explorer

    samples, outputs = synthetic_run(n)
    t0 = time.perf_counter()
    metrics = {m: {"value": float(np.nanmean(samples[c])), "ci_low": 0.4, "ci_high": 0.6, "n": n}
               for m, c in (("judge_voting", "judge_voting"), ("llm_as_judge_strict", "judge_strict"),
                            ("llm_as_judge_sampled", "judge_sampled"), ("bleu", "bleu"))}
    ex = task_explorer(samples, outputs, judges=["strict", "sampled"], headline="judge_voting", metrics=metrics,
                       metric_column=tasks.metric_column, title=f"open_ended · synthetic ({n} items)")
    page = ex.to_html()
    build_s = time.perf_counter() - t0
    encoding, blob = ex.payload()
    cell = new_code_cell("run.explorer()")
    cell.outputs = [new_output("display_data", data={"text/html": page, "text/plain": repr(ex)})]
    nb = new_notebook(cells=[new_markdown_cell("## Explore every item"), cell])
    executed = out_dir / "bench.ipynb"
    nbformat.write(nb, executed)
    t0 = time.perf_counter()
    report = out_dir / "report.html"
    render_html(executed, report)
    render_s = time.perf_counter() - t0
    return report, {"encoding": encoding, "blob_bytes": len(blob), "explorer_build_s": round(build_s, 2),
                    "nbconvert_s": round(render_s, 2)}


def open_times(report: Path, runs: int, actions: list[dict]) -> list[float]:
    from playwright.sync_api import sync_playwright

    times = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=[
            "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
            "--disable-component-update", "--disable-sync"])
        for _ in range(runs):
            context = browser.new_context()
            page = context.new_page()
            errors: list[str] = []
            page.on("pageerror", lambda e: errors.append(str(e)))
            t0 = time.perf_counter()
            page.goto(report.as_uri(), wait_until="commit")
            page.wait_for_selector("div.evekit-explorer[data-ready] tr.ee-row", timeout=60_000)
            times.append(time.perf_counter() - t0)
            ex = page.locator("div.evekit-explorer")
            total = int(ex.get_attribute("data-total") or 0)
            assert total > 0
            # Then what a reader does next: an outcome filter, a search over every text, the next page.
            t1 = time.perf_counter()
            ex.locator("select.ee-outcome").select_option("wrong")
            filtered = int(ex.get_attribute("data-shown") or 0)
            t2 = time.perf_counter()
            ex.locator("input.ee-search").fill("glacier")
            t3 = time.perf_counter()
            ex.locator("button.ee-next").click()
            t4 = time.perf_counter()
            assert 0 < filtered < total and ex.get_attribute("data-page") == "2"
            actions.append({"filter_s": round(t2 - t1, 3), "first_search_s": round(t3 - t2, 3),
                            "next_page_s": round(t4 - t3, 3)})
            assert not errors, errors
            context.close()
        browser.close()
    return times


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--items", type=int, default=10_000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--keep", help="write report.html into this folder (default: a temporary one)")
    a = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(a.keep) if a.keep else Path(tmp)
        out.mkdir(parents=True, exist_ok=True)
        load_before = os.getloadavg()
        report, info = build_report(a.items, out)
        size = report.stat().st_size
        actions: list[dict] = []
        times = open_times(report, a.runs, actions)
        load_after = os.getloadavg()
    result = {"items": a.items, "html_bytes": size, "html_mb": round(size / 1e6, 2), **info,
              "open_s": [round(t, 3) for t in times], "open_s_median": round(statistics.median(times), 3),
              "open_s_max": round(max(times), 3), "then": actions, "loadavg_before": [round(x, 2) for x in load_before],
              "loadavg_after": [round(x, 2) for x in load_after], "cpus": os.cpu_count(),
              "python": platform.python_version()}
    print(json.dumps(result, indent=2))
    results = ROOT / "benchmarks" / "results"
    results.mkdir(exist_ok=True)
    (results / "bench_explorer.json").write_text(json.dumps(result, indent=2) + "\n")
    ok = size < 20e6 and max(times) < 3.0
    print(f"{a.items} items: report.html {size / 1e6:.2f} MB, open {', '.join(f'{t:.2f}' for t in times)} s "
          f"(median {statistics.median(times):.2f}); load average {load_before[0]:.2f} -> {load_after[0]:.2f} on "
          f"{os.cpu_count()} cores; targets < 20 MB and < 3 s: {'met' if ok else 'MISSED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
