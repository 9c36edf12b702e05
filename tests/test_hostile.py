"""Hostile-but-fair input (issue 24): one row per case, each asserting its class of outcome.

- "error": a clear error before anything runs, naming the file / field / row / folder (and never
  repeating a secret);
- "fine": handled correctly (the right answer, the right pairing, text shown as text);
- "recorded": the run goes on and the problem is recorded where a reader sees it (a mark in the
  index, a stale note, an unmatched row, a failed item).

What needs a kernel (every call failed, a failed re-run leaving an older result, kill -9 mid-batch)
is in tests/test_hostile_runs.py; injections into judges in tests/test_injection.py and
tests/test_verdict_rules.py; client and cache faults in tests/test_client_faults.py,
tests/test_client_replies.py and tests/test_cache_faults.py.
"""
from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any, Callable

import pandas as pd
import pytest

from evekit.errors import EvekitError
from evekit.paths import REPO_ROOT

NOTEBOOKS = REPO_ROOT / "notebooks"
KEY = "sk-proj-Zx81hostileKEYvalue0000000000"  # never to be repeated by a message
URL = "http://127.0.0.1:9/v1"


# ------------------------------------------------------------------------------------- helpers
def _param_file(tmp: Path, name: str, text: str) -> Path:
    path = tmp / "params" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


def _read(tmp: Path, name: str, text: str, **kw: Any) -> Any:
    from evekit.batch.paramfiles import read_run_file

    return read_run_file(_param_file(tmp, name, text), NOTEBOOKS, kw.pop("server_url", None), check_files=False, **kw)


def _answers(path: Path, rows: list[dict[str, Any]]) -> str:
    pd.DataFrame(rows).to_csv(path, index=False)
    return str(path)


def _rag_rows(order: list[int], *, context: bool = True, doc_id: bool = True, answer: str = "A") -> list[dict]:
    """Two documents, one question asked over each (RAG): item 0 about Sentinel-1, item 1 about Sentinel-2."""
    items = [("What is the revisit time?", "12 days", "Sentinel-1 has a revisit of 12 days."),
             ("What is the revisit time?", "5 days", "Sentinel-2 has a revisit of 5 days."),
             ("Which band does the radar use?", "C-band", "Sentinel-1 carries a C-band SAR.")]
    out = []
    for i in order:
        q, target, doc = items[i]
        row = {"doc.Question": q, "target": target, "filtered_resps": f"{answer}{i}: {target}"}
        if doc_id:
            row["doc_id"] = i
        if context:
            row["doc.Doc 1"] = doc
        out.append(row)
    return out


# ----------------------------------------------------------------------- parameter files (pre-kernel)
def case_empty_file(tmp):
    _read(tmp, "mcqa_single_answer.yaml", "")


def case_alias_bomb(tmp):
    bomb = "a: &a [x,x,x,x,x,x,x,x,x]\n" + "".join(
        f"{c}: &{c} [{','.join('*' + p for p in [chr(ord(c) - 1)] * 9)}]\n" for c in "bcdefghi")
    from evekit.batch.paramfiles import load_params

    path = _param_file(tmp, "mcqa_single_answer.yaml", bomb + "judges: *i\n")
    t0 = time.monotonic()
    try:
        load_params(path)
    finally:
        assert time.monotonic() - t0 < 2, "an alias bomb must be refused at once"


def case_deep_nesting(tmp):
    _read(tmp, "mcqa_single_answer.yaml", "judges: " + "[" * 50 + "]" * 50 + "\n")


def case_huge_file(tmp):
    _read(tmp, "mcqa_single_answer.yaml", "model_name: m\n" + "#" * 1_100_000 + "\n")


def case_not_a_mapping(tmp):
    _read(tmp, "mcqa_single_answer.yaml", "- model_name\n- m\n")


def case_unknown_parameter(tmp):
    _read(tmp, "mcqa_single_answer.yaml", f"model_name: m\nbase_url: {URL}\nmodel_nmae: x\n")


def case_limit_zero(tmp):
    _read(tmp, "mcqa_single_answer.yaml", f"model_name: m\nbase_url: {URL}\nlimit: 0\n")


def case_concurrency_zero(tmp):
    _read(tmp, "mcqa_single_answer.yaml", f"model_name: m\nbase_url: {URL}\nconcurrency: 0\n")


def case_unknown_task(tmp):
    _read(tmp, "win_rate.yaml", "task: no_such_task\nmodel_a: [{name: a, file: a.csv}]\nmodel_b: [{name: b, file: b.csv}]\n"
          f"judges: [{{name: j, model: m, base_url: {URL}}}]\n")


def case_no_such_notebook(tmp):
    _read(tmp, "no_such_notebook.yaml", "model_name: m\n")


def case_key_as_api_key_env(tmp):
    _read(tmp, "mcqa_single_answer.yaml", f"model_name: m\nbase_url: {URL}\napi_key_env: {KEY}\n")


def case_key_in_url_userinfo(tmp):
    _read(tmp, "mcqa_single_answer.yaml", f"model_name: m\nbase_url: http://user:{KEY}@127.0.0.1:9/v1\n")


def case_key_in_judge_url_query(tmp):
    _read(tmp, "open_ended.yaml", f"model_name: m\nbase_url: {URL}\n"
          f"judges: [{{name: j, model: m, base_url: 'http://127.0.0.1:9/v1?key={KEY}'}}]\n")


def case_duplicate_judges(tmp):
    _read(tmp, "open_ended.yaml", f"model_name: m\nbase_url: {URL}\n"
          f"judges: [{{name: j1, model: jm, base_url: {URL}}}, {{name: j2, model: jm, base_url: '{URL}/'}}]\n")


def case_run_name_parent(tmp):
    _read(tmp, "mcqa_single_answer.yaml", f"model_name: m\nbase_url: {URL}\nrun_name: ../../x\n")


def case_run_name_absolute(tmp):
    _read(tmp, "mcqa_single_answer.yaml", f"model_name: m\nbase_url: {URL}\nrun_name: /tmp/elsewhere\n")


def case_run_name_nul(tmp):
    _read(tmp, "mcqa_single_answer.yaml", f'model_name: m\nbase_url: {URL}\nrun_name: "a\\0b"\n')


def case_output_dir_nul(tmp):
    _read(tmp, "mcqa_single_answer.yaml", f'model_name: m\nbase_url: {URL}\noutput_dir: "out\\0x"\n')


def case_run_name_with_slash_is_one_folder(tmp):
    from evekit.paths import safe_name

    run = _read(tmp, "mcqa_single_answer.yaml", f"model_name: m\nbase_url: {URL}\nrun_name: exp/1\n")
    assert safe_name(run.run_name) == "exp__1"


def case_server_url_without_server(tmp, monkeypatch):
    monkeypatch.delenv("EVEKIT_SERVER_URL", raising=False)
    _read(tmp, "mcqa_single_answer.yaml", 'model_name: m\nbase_url: "${EVEKIT_SERVER_URL}"\n')


def case_server_url_exported(tmp, monkeypatch):
    monkeypatch.setenv("EVEKIT_SERVER_URL", URL)
    from evekit.batch.paramfiles import check_param_files

    path = _param_file(tmp, "mcqa_single_answer.yaml", 'model_name: m\nbase_url: "${EVEKIT_SERVER_URL}"\n')
    assert check_param_files([path], NOTEBOOKS, os.environ["EVEKIT_SERVER_URL"]) == []
    assert _read(tmp, "mcqa_single_answer.yaml", path.read_text(), server_url=URL).injected["base_url"] == URL


def case_plan_keeps_the_placeholder(tmp, monkeypatch):
    from evekit.batch.paramfiles import SERVER_URL_PLACEHOLDER, load_params

    monkeypatch.delenv("EVEKIT_SERVER_URL", raising=False)
    path = _param_file(tmp, "mcqa_single_answer.yaml", 'model_name: m\nbase_url: "${EVEKIT_SERVER_URL}"\n')
    assert load_params(path, SERVER_URL_PLACEHOLDER)["base_url"] == SERVER_URL_PLACEHOLDER  # evekit plan, no server


def case_other_unset_variable(tmp, monkeypatch):
    monkeypatch.delenv("EVEKIT_NOT_SET_ANYWHERE", raising=False)
    _read(tmp, "mcqa_single_answer.yaml", f"model_name: m\nbase_url: {URL}\ndataset: '${{EVEKIT_NOT_SET_ANYWHERE}}/d.jsonl'\n")


# ------------------------------------------------------------------------------------ odd datasets
def _load(tmp, rows):
    from evekit.data import load_items
    from evekit.tasks import TASKS

    path = tmp / "odd.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return load_items(TASKS["mcqa_single_answer"], str(path))


def case_one_choice(tmp):
    _load(tmp, [{"Question": "q", "Choices": ["only"], "Answer": "A"}])


def case_duplicate_choice_texts(tmp):
    _load(tmp, [{"Question": "q", "Choices": ["C-band", "c-band ", "X"], "Answer": "A"}])


# ------------------------------------------------------------------------- answers read as letters
@pytest.mark.parametrize("reply", ["\u200bB", "\uff22", "\u202bB\u202c", "\u2066B\u2069"])
def test_look_alike_letters_are_read(reply):
    from evekit.parsing import parse_letters

    result = parse_letters(reply, ["A", "B", "C", "D"], multiple=False)
    assert result.labels == ["B"] and result.reason is None


def case_look_alike_letters(tmp):
    for reply in ("\u200bB", "\uff22", "\u202bB\u202c"):
        test_look_alike_letters_are_read(reply)


# ---------------------------------------------------------------------------------- pages as text
PAYLOADS = ["<script>alert(1)</script>", "<img src=x onerror=alert(1)>", '<iframe srcdoc="<b>x</b>">',
            '<a href="javascript:alert(1)">x</a>', "<style>body{display:none}</style>", "<b>unclosed"]


def case_markup_in_tables(tmp):
    from evekit.report import FullText

    page = FullText(pd.DataFrame({"response": PAYLOADS}), caption="<script>t()</script>").to_html()
    for p in PAYLOADS + ["<script>t()</script>"]:
        assert p not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    # A column name can come from data too (a group_by value, a judge's name): escaped as well.
    page = FullText(pd.DataFrame({p: ["x"] for p in PAYLOADS})).to_html()
    for p in PAYLOADS:
        assert p not in page
    assert "&lt;img src=x onerror=alert(1)&gt;" in page


# --------------------------------------------------------------------------------- pairing by item
def case_rag_pairs_by_document(tmp):
    from evekit.runs.win_rate.matching import ModelSpec, match_files

    a = _answers(tmp / "a.csv", _rag_rows([0, 1, 2], answer="A"))
    b = _answers(tmp / "b.csv", _rag_rows([1, 2, 0], answer="B"))  # another order, no doc_id help needed
    comp = match_files(ModelSpec("a", a), ModelSpec("b", b))
    assert comp.target_mismatch == 0 and len(comp.pairs) == 3
    for r in comp.pairs.itertuples():  # each answer judged against the same item's answer
        assert r.answer_a[1] == r.answer_b[1]


def case_rag_pairs_without_context_by_reference(tmp):
    from evekit.runs.win_rate.matching import ModelSpec, match_files

    a = _answers(tmp / "a.csv", _rag_rows([0, 1, 2], context=False, doc_id=False))
    b = _answers(tmp / "b.csv", _rag_rows([1, 0, 2], context=False, doc_id=False, answer="B"))
    comp = match_files(ModelSpec("a", a), ModelSpec("b", b))
    assert comp.target_mismatch == 0 and all(r.answer_a[1] == r.answer_b[1] for r in comp.pairs.itertuples())


def case_missing_item_is_reported(tmp):
    from evekit.runs.win_rate.matching import ModelSpec, match_files

    a = _answers(tmp / "a.csv", _rag_rows([0, 1, 2]))
    b = _answers(tmp / "b.csv", _rag_rows([2, 0], answer="B"))
    comp = match_files(ModelSpec("a", a), ModelSpec("b", b))
    assert len(comp.pairs) == 2 and comp.unmatched["row"].tolist() == [2]  # a's row 2: item 1, not in b
    assert comp.unmatched["model"].tolist() == ["a"]


def case_ambiguous_pairing_names_rows(tmp):
    from evekit.runs.win_rate.matching import ModelSpec, match_files

    rows = _rag_rows([0, 1], doc_id=False)
    for r in rows:
        r["target"] = "a week or two"  # same reference: only the documents tell the items apart
    a = _answers(tmp / "a.csv", rows)
    b_rows = [{k: v for k, v in r.items() if k != "doc.Doc 1"} for r in reversed(rows)]
    b = _answers(tmp / "b.csv", b_rows)
    match_files(ModelSpec("a", a), ModelSpec("b", b))


def case_doc_id_settles_repeats(tmp):
    from evekit.runs.win_rate.matching import ModelSpec, match_files

    rows = _rag_rows([0, 1])
    for r in rows:
        r["target"] = "a week or two"
    a = _answers(tmp / "a.csv", rows)
    b = _answers(tmp / "b.csv", [{k: v for k, v in r.items() if k != "doc.Doc 1"}
                                 | {"filtered_resps": "B" + r["filtered_resps"][1:]} for r in reversed(rows)])
    comp = match_files(ModelSpec("a", a), ModelSpec("b", b))
    assert len(comp.pairs) == 2 and all(r.answer_a[1] == r.answer_b[1] for r in comp.pairs.itertuples())


def case_ranking_pairs_by_document(tmp):
    from evekit.runs.ranking.battles import match_models
    from evekit.runs.win_rate.matching import ModelSpec

    files = [ModelSpec(n, _answers(tmp / f"{n}.csv", _rag_rows(order, answer=n)))
             for n, order in (("A", [0, 1, 2]), ("B", [2, 1, 0]), ("C", [1, 0, 2]))]
    matched = match_models(files)
    assert len(matched.questions) == 3
    for _, row in matched.answers.iterrows():
        assert len({v[1] for v in row}) == 1  # every model's answer to the same item


# ------------------------------------------------------------------------------------ run folder lock
def _hold_lock(folder: Path) -> subprocess.Popen:
    code = (f"import sys, time; sys.path.insert(0, {str(REPO_ROOT)!r}); from evekit.batch.lock import RunFolderLock; "
            f"l = RunFolderLock({str(folder)!r}); l.acquire(); print('held', flush=True); time.sleep(60)")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)})
    assert proc.stdout.readline().strip() == "held"
    return proc


def case_second_run_on_a_locked_folder(tmp):
    from evekit import batch

    folder = tmp / "out" / "t"
    holder = _hold_lock(folder)
    try:
        nb_dir = tmp / "notebooks"
        nb_dir.mkdir()
        import nbformat
        from nbformat.v4 import new_code_cell, new_notebook

        cell = new_code_cell('run_name = "t"\noutput_dir = "outputs"')
        cell.metadata["tags"] = ["parameters"]
        nb = new_notebook(cells=[cell, new_code_cell("raise SystemExit('must not run')")])
        nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
        nbformat.write(nb, nb_dir / "x.ipynb")
        (tmp / "x.yaml").write_text("run_name: t\n")
        import contextlib
        import io

        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            code = batch.run_batch([str(tmp / "x.yaml")], output_dir=str(tmp / "out"), notebooks_dir=str(nb_dir))
        assert code == 2 and not (folder / "notebooks").exists()
        raise EvekitError(err.getvalue() + f" (holder {holder.pid})")
    finally:
        holder.kill()
        holder.wait()


def case_lock_of_a_killed_run_blocks_nobody(tmp):
    from evekit.batch.lock import RunFolderLock

    folder = tmp / "run"
    holder = _hold_lock(folder)
    os.kill(holder.pid, signal.SIGKILL)
    holder.wait()
    with RunFolderLock(folder):
        pass


# ------------------------------------------------------------------------------ atomic files, full disk
def case_enospc_on_replace_keeps_the_old_file(tmp, monkeypatch):
    from evekit import atomic

    path = tmp / "results.json"
    path.write_text('{"old": true}')

    def full(*_a, **_k):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(atomic.os, "replace", full)
    try:
        atomic.write_text_atomic(path, '{"new": true}')
    finally:
        assert path.read_text() == '{"old": true}'
        assert [p.name for p in tmp.iterdir()] == ["results.json"]  # no temporary file left


def case_leftovers_of_a_killed_write(tmp, monkeypatch):
    import tempfile as tf

    from evekit import atomic

    (tmp / "r" / "m").mkdir(parents=True)
    fd, left = tf.mkstemp(prefix=".results.json.", suffix=".tmp", dir=tmp / "r" / "m")  # as atomic_path names it
    os.close(fd)
    (tmp / "r" / ".mine.tmp").write_text("a user's file")
    assert atomic.remove_leftovers(tmp / "r") == 1
    assert not Path(left).exists() and (tmp / "r" / ".mine.tmp").exists()


@pytest.fixture
def tiny_disk(tmp_path):
    """A 200 KB tmpfs (root only): a real full disk."""
    if os.geteuid() != 0 or sys.platform != "linux":
        pytest.skip("a tmpfs needs root on Linux")
    mnt = tmp_path / "tiny"
    mnt.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=200k", "tmpfs", str(mnt)], capture_output=True)
    if done.returncode:
        pytest.skip(f"cannot mount a tmpfs: {done.stderr.decode().strip()}")
    yield mnt
    subprocess.run(["umount", str(mnt)], check=False)


def _fill(folder: Path) -> None:
    fd = os.open(folder / "filler", os.O_WRONLY | os.O_CREAT)
    try:
        while True:
            os.write(fd, b"\0" * 4096)
    except OSError as exc:
        assert exc.errno == errno.ENOSPC
    finally:
        os.close(fd)


def test_a_real_full_disk_keeps_every_file_whole(tiny_disk):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from evekit.atomic import save_figure_atomic, write_csv_atomic, write_text_atomic
    from evekit.errors import OutputError

    old = tiny_disk / "results.json"
    write_text_atomic(old, '{"kept": 1}')
    _fill(tiny_disk)
    with pytest.raises(OutputError, match=r"results\.json: the disk is full.*earlier version was kept"):
        write_text_atomic(old, json.dumps({"x": "y" * 300_000}))
    assert json.loads(old.read_text()) == {"kept": 1}
    fig, ax = plt.subplots()
    ax.plot(range(1000))
    with pytest.raises(OutputError, match=r"plot\.png: the disk is full.*nothing was written"):
        save_figure_atomic(fig, tiny_disk / "plot.png", dpi=300)
    plt.close(fig)
    with pytest.raises(OutputError, match="samples.csv"):
        write_csv_atomic(pd.DataFrame({"a": ["z" * 1000] * 500}), tiny_disk / "samples.csv", index=False)
    assert sorted(p.name for p in tiny_disk.iterdir()) == ["filler", "results.json"]  # no 0-byte PNG, no temp


def case_real_full_disk(tmp, tiny_disk):
    test_a_real_full_disk_keeps_every_file_whole(tiny_disk)


# Writers that are not output files: a temporary copy renamed by hand, a scratch folder, the cache's spool.
NOT_OUTPUTS = {"evekit/tokenizer.py", "evekit/runs/task/corrected.py", "evekit/runs/win_rate/corrected.py", "evekit/cache.py", "evekit/batch/batchfile.py",
               "evekit/server.py", "evekit/atomic.py",
               "evekit/batch/kernels.py"}  # kernels: a kernel's stderr log, appended to as it runs


def test_every_output_file_is_written_through_evekit_atomic():
    import re

    writer = re.compile(r"\.to_csv\(\s*(?!index=)[^)\s]|\.write_text\(|\.write_bytes\(|\.savefig\(|open\([^)]*['\"][wa]b?['\"]")
    found = []
    for path in sorted((REPO_ROOT / "evekit").rglob("*.py")):
        rel = path.relative_to(REPO_ROOT).as_posix()
        if rel in NOT_OUTPUTS:
            continue
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if writer.search(line) and not line.lstrip().startswith("#"):
                found.append(f"{rel}:{n}: {line.strip()}")
    assert not found, "write through evekit.atomic:\n" + "\n".join(found)


# ---------------------------------------------------------------------------- stale and failed results
def _task_run(run_dir: Path, stem: str, execution: str, *, n: int = 4, failed: int = 0, model: str = "m") -> Path:
    from evekit.runs.records import calls_outcome, write_run_record
    from evekit.runs.registry import KINDS

    d = run_dir / model / "mcqa_single_answer"
    d.mkdir(parents=True, exist_ok=True)
    metric = {"value": None if failed == n else 0.5, "ci_low": 0.2, "ci_high": 0.8, "n": n - failed}
    (d / "results.json").write_text(json.dumps({"task": "mcqa_single_answer", "model": model, "n": n,
                                                "n_unparsed": 0, "n_failed": failed, "metrics": {"acc": metric}}))
    os.environ["EVEKIT_EXECUTION"] = execution
    try:
        write_run_record(d, kind=KINDS["task"], notebook="mcqa_single_answer", run_name=run_dir.name,
                         files=["results.json"], task="mcqa_single_answer", model=model,
                         calls=[calls_outcome("model calls", n, failed, ["HTTP 500 from http://x/v1"] if failed else [])])
    finally:
        del os.environ["EVEKIT_EXECUTION"]
    return d


def _attempt(run_dir: Path, stem: str, execution: str, status: str, inputs: dict[str, str | None], reason=None):
    from evekit.runs.records import write_attempt

    write_attempt(run_dir, stem, execution=execution, status=status, params_file=Path(f"/p/{stem}.yaml"),
                  inputs=inputs, started="2026-01-01T00:00:00+00:00", reason=reason)


def _index(run_dir: Path) -> str:
    from evekit.batch.index import write_index

    return write_index(run_dir).read_text()


def _stale_setup(tmp: Path) -> tuple[Path, Path, Path]:
    from evekit.runs.records import fingerprint

    run_dir = tmp / "out" / "r"
    params = tmp / "mcqa_single_answer.yaml"
    params.write_text("limit: 4\n")
    dataset = tmp / "d.jsonl"
    dataset.write_text('{"Question": "q"}\n')
    _task_run(run_dir, "mcqa_single_answer", "mcqa_single_answer-aaa")
    _attempt(run_dir, "mcqa_single_answer", "mcqa_single_answer-aaa", "passed",
             {str(params): fingerprint(params), str(dataset): fingerprint(dataset)})
    return run_dir, params, dataset


def case_unchanged_run_is_current(tmp):
    run_dir, _, _ = _stale_setup(tmp)
    page = _index(run_dir)
    assert "stale" not in page.split("<h2>Glossary")[0].lower().replace("stale{", "")


def case_param_file_changed(tmp):
    run_dir, params, _ = _stale_setup(tmp)
    params.write_text("limit: 8\n")
    page = _index(run_dir)
    assert "stale: from" in page and "changed since: mcqa_single_answer.yaml" in page


def case_dataset_changed(tmp):
    run_dir, _, dataset = _stale_setup(tmp)
    dataset.write_text('{"Question": "other"}\n')
    assert "changed since: d.jsonl" in _index(run_dir)


def case_failed_rerun_leaves_older_result_marked(tmp):
    run_dir, _, _ = _stale_setup(tmp)
    _attempt(run_dir, "mcqa_single_answer", "mcqa_single_answer-bbb", "failed", {}, reason="DeadKernelError")
    page = _index(run_dir)
    assert "other parameters" in page and "failed: DeadKernelError" in page


def case_rerun_elsewhere_marks_the_old_folder(tmp):
    run_dir, _, _ = _stale_setup(tmp)
    _task_run(run_dir, "mcqa_single_answer", "mcqa_single_answer-ccc", model="m2")
    _attempt(run_dir, "mcqa_single_answer", "mcqa_single_answer-ccc", "passed", {})
    from evekit.runs.records import find_run_records, stale_reasons

    records, _ = find_run_records(run_dir)
    stale = stale_reasons(run_dir, records)
    assert list(stale) == [run_dir / "m" / "mcqa_single_answer"]
    assert "did not write this folder" in stale[run_dir / "m" / "mcqa_single_answer"]


def case_summary_marks_stale(tmp):
    from evekit.runs.summary import board

    run_dir, params, _ = _stale_setup(tmp)
    params.write_text("limit: 8\n")
    entries = board.collect(run_dir.parent, [run_dir.name])
    table = board.leaderboard(entries)
    assert table["stale"].str.contains("changed since").all()
    assert "changed since" in board.leaderboard_wide(table).iloc[0, 0]


def case_summary_older_than_a_result(tmp):
    from evekit.runs.records import write_run_record
    from evekit.runs.registry import KINDS

    run_dir, _, _ = _stale_setup(tmp)
    summary = run_dir / "summary"
    summary.mkdir()
    write_run_record(summary, kind=KINDS["summary"], notebook="summary", run_name="r", files=[])
    record = json.loads((summary / "run.json").read_text())
    record["created"] = "2000-01-01T00:00:00+00:00"  # made before the task result was written
    (summary / "run.json").write_text(json.dumps(record))
    assert "stale: from 2000-01-01T00:00:00+00:00; written again since: mcqa_single_answer" in _index(run_dir)


def case_failure_report_of_a_file_that_since_passed(tmp):
    run_dir, _, _ = _stale_setup(tmp)
    (run_dir / "failed" / "mcqa_single_answer").mkdir(parents=True)
    (run_dir / "failed" / "mcqa_single_answer" / "report.html").write_text("<p>old failure</p>")
    page = _index(run_dir)
    assert "FAILED: mcqa_single_answer" not in page and "earlier failure: mcqa_single_answer" in page
    _attempt(run_dir, "mcqa_single_answer", "mcqa_single_answer-fff", "failed", {})
    assert "FAILED: mcqa_single_answer" in _index(run_dir)


def case_all_calls_failed_is_marked(tmp):
    from evekit.runs.records import all_calls_failed, read_run_record

    run_dir = tmp / "out" / "r"
    d = _task_run(run_dir, "mcqa_single_answer", "mcqa_single_answer-ddd", failed=4)
    why = all_calls_failed(read_run_record(d / "run.json"))
    assert why == "every one of its model calls failed (4 of 4): HTTP 500 from http://x/v1"
    page = _index(run_dir)
    assert "ALL CALLS FAILED" in page
    partial = _task_run(tmp / "out" / "s", "x", "x-eee", failed=3)
    assert all_calls_failed(read_run_record(partial / "run.json")) is None


def case_judges_without_verdicts_are_not_failed_calls(tmp):
    from evekit.runs.records import calls_outcome

    down = calls_outcome("judge calls", 2, errors=["call failed (json_schema): HTTP 500 from http://j/v1",
                                                   "judge endpoint unusable: nothing answered at http://j/v1"])
    assert (down["failed"], down["error"]) == (2, "call failed (json_schema): HTTP 500 from http://j/v1")
    # replies that came but held no verdict are abstentions (shown as "judged n of N"), not failed calls
    vague = calls_outcome("judge calls", 2, errors=["unusable reply (text): no JSON object in the reply", None])
    assert vague["failed"] == 0


# ----------------------------------------------------------------------------------------- the table
# (id, issue's case, expected class, what the outcome must say)
CASES: list[tuple[str, str, str, Callable, str]] = [
    ("empty_file", "smaller: an empty parameter file replays the demo", "error", case_empty_file, "the file is empty"),
    ("alias_bomb", "7: a 513-byte YAML alias bomb hangs", "error", case_alias_bomb, "aliases"),
    ("deep_nesting", "own: nesting 50 deep", "error", case_deep_nesting, "nested more than"),
    ("huge_file", "own: a 1.1 MB parameter file", "error", case_huge_file, "a parameter file may have at most"),
    ("not_a_mapping", "own: a YAML list", "error", case_not_a_mapping, "expected a mapping"),
    ("unknown_parameter", "own: a misspelt parameter", "error", case_unknown_parameter, "model_nmae"),
    ("limit_zero", "smaller: limit 0 rejected only in the kernel", "error", case_limit_zero, "limit"),
    ("concurrency_zero", "smaller: concurrency 0 rejected only in the kernel", "error", case_concurrency_zero,
     "concurrency"),
    ("unknown_task", "smaller: an unknown task rejected only in the kernel", "error", case_unknown_task,
     "no_such_task"),
    ("no_such_notebook", "own: a file of no notebook", "error", case_no_such_notebook, "no notebook"),
    ("key_as_api_key_env", "3: a key pasted as api_key_env reaches the notebook", "error", case_key_as_api_key_env,
     "api_key_env"),
    ("key_in_url", "3: a key in base_url userinfo", "error", case_key_in_url_userinfo, "base_url"),
    ("key_in_judge_query", "3: a judge's ?key= in base_url", "error", case_key_in_judge_url_query, "judges"),
    ("duplicate_judges", "6: two judge names on one model and endpoint", "error", case_duplicate_judges, "j1"),
    ("run_name_parent", "8: run_name ../../x", "error", case_run_name_parent, "would leave output_dir"),
    ("run_name_absolute", "8: run_name an absolute path", "error", case_run_name_absolute, "would leave output_dir"),
    ("run_name_nul", "own: run_name with NUL", "error", case_run_name_nul, "control characters"),
    ("output_dir_nul", "own: output_dir with NUL", "error", case_output_dir_nul, "output_dir"),
    ("run_name_slash", "own: run_name exp/1 stays one folder", "fine", case_run_name_with_slash_is_one_folder, ""),
    ("server_url_unset", "smaller: ${EVEKIT_SERVER_URL} without --serve", "error", case_server_url_without_server,
     "base_url: ${EVEKIT_SERVER_URL}"),
    ("server_url_exported", "smaller: ${EVEKIT_SERVER_URL} exported crashed the CLI", "fine", case_server_url_exported,
     ""),
    ("plan_placeholder", "own: evekit plan without a server keeps ${EVEKIT_SERVER_URL}", "fine",
     case_plan_keeps_the_placeholder, ""),
    ("other_unset_variable", "own: another unset ${VAR}", "error", case_other_unset_variable,
     "dataset: ${EVEKIT_NOT_SET_ANYWHERE}"),
    ("one_choice", "smaller: a choices list of length 1", "error", case_one_choice, "only one choice"),
    ("duplicate_choices", "smaller: duplicate choice texts", "error", case_duplicate_choice_texts, "same text"),
    ("look_alike_letters", "smaller: zero-width, fullwidth, bidi-wrapped B", "fine", case_look_alike_letters, ""),
    ("markup_in_tables", "1: markup in FullText tables and titles", "fine", case_markup_in_tables, ""),
    ("rag_by_document", "5: win rate mispairs RAG items", "fine", case_rag_pairs_by_document, ""),
    ("rag_by_reference", "5: RAG files without documents", "fine", case_rag_pairs_without_context_by_reference, ""),
    ("missing_item", "own: an item missing from one file", "recorded", case_missing_item_is_reported, ""),
    ("ambiguous_pairing", "own: repeats only documents tell apart, one file without them", "error",
     case_ambiguous_pairing_names_rows, "a.csv rows 1, 2"),
    ("doc_id_repeats", "own: such repeats with doc_ids in both files", "fine", case_doc_id_settles_repeats, ""),
    ("ranking_by_document", "5 (ranking): three files in three orders", "fine", case_ranking_pairs_by_document, ""),
    ("locked_folder", "10: two evekit run on one output_dir", "error", case_second_run_on_a_locked_folder,
     "another evekit run (pid"),
    ("killed_lock", "own: the lock of a kill -9'd run", "fine", case_lock_of_a_killed_run_blocks_nobody, ""),
    ("enospc_replace", "9: output_dir fills (injected)", "error", case_enospc_on_replace_keeps_the_old_file,
     "results.json: the disk is full"),
    ("killed_write_leftovers", "own: temporary files of writes a kill cut short", "fine",
     case_leftovers_of_a_killed_write, ""),
    ("real_full_disk", "9: output_dir fills (a 200 KB tmpfs): no 0-byte PNG", "fine", case_real_full_disk, ""),
    ("unchanged_current", "own: an unchanged run is not marked", "fine", case_unchanged_run_is_current, ""),
    ("param_file_changed", "4: parameters changed after the run", "recorded", case_param_file_changed, ""),
    ("dataset_changed", "own: the dataset changed after the run", "recorded", case_dataset_changed, ""),
    ("failed_rerun", "4: a failed re-run leaves the older number", "recorded", case_failed_rerun_leaves_older_result_marked,
     ""),
    ("rerun_elsewhere", "own: a re-run that wrote another folder", "recorded", case_rerun_elsewhere_marks_the_old_folder,
     ""),
    ("summary_stale", "4: the summary shows a stale number", "recorded", case_summary_marks_stale, ""),
    ("summary_older", "own: a summary made before a result it reads was redone", "recorded",
     case_summary_older_than_a_result, ""),
    ("all_calls_failed", "3: every call failed, exit 0", "recorded", case_all_calls_failed_is_marked, ""),
    ("old_failure_report", "10: the index shows FAILED for a run that passed", "recorded",
     case_failure_report_of_a_file_that_since_passed, ""),
    ("judge_calls_failed", "own: judges down vs judges without a verdict", "fine",
     case_judges_without_verdicts_are_not_failed_calls, ""),
]


@pytest.mark.parametrize("case_id, issue_case, expected, case, says", CASES, ids=[c[0] for c in CASES])
def test_hostile_case(case_id, issue_case, expected, case, says, tmp_path, request, monkeypatch):
    import inspect

    kwargs = {}
    wanted = inspect.signature(case).parameters
    if "monkeypatch" in wanted:
        kwargs["monkeypatch"] = monkeypatch
    if "tiny_disk" in wanted:
        kwargs["tiny_disk"] = request.getfixturevalue("tiny_disk")
    try:
        case(tmp_path, **kwargs)
    except (EvekitError, ValueError, OSError) as exc:
        outcome, message = "error", str(exc)
    else:
        outcome, message = ("recorded" if expected == "recorded" else "fine"), ""
    assert outcome == expected, f"{issue_case}: {outcome} {message}"
    if outcome == "error":
        assert says in message, message
        assert KEY not in message and "Traceback" not in message
        assert str(tmp_path) in message or case_id in ("one_choice", "duplicate_choices") or "odd.jsonl" in message \
            or "a.csv" in message or case_id == "locked_folder", f"the message names no file: {message}"


# ------------------------------------ findings of the case catalogue (benchmarks/hostile_cases.py)
def test_a_parameter_file_that_is_not_utf8_is_refused_naming_the_byte(tmp_path):
    path = tmp_path / "params" / "mcqa_single_answer.yaml"
    path.parent.mkdir(parents=True)
    path.write_bytes(b"model_name: caf\xe9\n")  # Latin-1, not UTF-8: replaced bytes would run 'caf\ufffd'
    from evekit.batch.paramfiles import read_run_file

    with pytest.raises(EvekitError, match=r"mcqa_single_answer\.yaml: not UTF-8 text \(byte 15"):
        read_run_file(path, NOTEBOOKS, None, check_files=False)


def test_a_parameter_given_twice_is_refused_naming_both_lines(tmp_path):
    with pytest.raises(EvekitError, match=r"line 3: 'model_name' is given twice \(first on line 1\)"):
        _read(tmp_path, "mcqa_single_answer.yaml", "model_name: a\nlimit: 3\nmodel_name: b\n")
    with pytest.raises(EvekitError, match=r"'name' is given twice"):  # inside a judge entry too
        _read(tmp_path, "win_rate.yaml", "judges:\n  - {name: j, name: k, model: m, base_url: 'http://h/v1'}\n")


@pytest.mark.parametrize("value", [".nan", ".inf", "-.inf"])
def test_a_number_that_is_not_finite_is_refused(tmp_path, value):
    with pytest.raises(EvekitError, match=r"temperature=.* must be a finite number"):
        _read(tmp_path, "mcqa_single_answer.yaml", f"model_name: m\nbase_url: 'http://h/v1'\ntemperature: {value}\n")


@pytest.mark.parametrize("url", ["file:///etc/passwd", "ftp://host/v1", "localhost:8000/v1"])
def test_a_base_url_that_is_not_http_is_refused(tmp_path, url):
    with pytest.raises(EvekitError, match=r"base_url .* is not an http:// or https:// URL"):
        _read(tmp_path, "mcqa_single_answer.yaml", f"model_name: m\nbase_url: '{url}'\n")
    assert _read(tmp_path, "mcqa_single_answer.yaml", "model_name: m\nbase_url: 'HTTPS://host/v1'\n").params.base_url
