"""Batch runs with papermill: order, parameter files, failures reported, HTML written."""
from __future__ import annotations

import json
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook

from evekit import batch
from evekit.runs.registry import KINDS


def _notebook(path: Path, body: str) -> None:
    params = new_code_cell('run_name = "t"\noutput_dir = "outputs"\nvalue = 1')
    params.metadata["tags"] = ["parameters"]
    nb = new_notebook(cells=[params, new_code_cell(body)])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, path)


def test_run_order_puts_win_rate_and_summary_last():
    files = [Path(p) for p in ("summary.yaml", "win_rate.yaml", "refusal.yaml", "open_ended.5shot.yaml")]
    assert [f.name for f in batch.run_order(files)] == [
        "refusal.yaml", "open_ended.5shot.yaml", "win_rate.yaml", "summary.yaml"]


def test_run_order_puts_judge_validation_first():
    files = [Path(p) for p in ("summary.yaml", "open_ended.yaml", "judge_validation.pairwise.yaml",
                               "win_rate.yaml", "judge_validation.yaml")]
    assert [f.name for f in batch.run_order(files)] == [
        "judge_validation.pairwise.yaml", "judge_validation.yaml", "open_ended.yaml", "win_rate.yaml", "summary.yaml"]


def test_server_url_placeholder_is_filled_in_everywhere(tmp_path):
    f = tmp_path / "open_ended.yaml"
    f.write_text('base_url: "${EVEKIT_SERVER_URL}"\njudges:\n  - {name: j, base_url: "${EVEKIT_SERVER_URL}"}\n')
    params = batch.load_params(f, "http://127.0.0.1:9/v1")
    assert params["base_url"] == "http://127.0.0.1:9/v1"
    assert params["judges"][0]["base_url"] == "http://127.0.0.1:9/v1"
    with pytest.raises(ValueError, match="--serve"):
        batch.load_params(f, None)


SAVE = ("from pathlib import Path\nfrom evekit.runs.records import write_run_record\nfrom evekit.runs.registry import KINDS\n"
        "d = Path(output_dir) / run_name / 'x' / 'good'\n"
        "d.mkdir(parents=True, exist_ok=True)\n(d / 'results.json').write_text('{}')\n"
        "write_run_record(d, kind=KINDS['task'], notebook='good', run_name=run_name, files=['results.json'])\n"
        "print(f'Saved outputs to {d}')")


def test_failed_notebook_is_named_exit_code_is_nonzero_and_others_still_run(tmp_path, capsys):
    nb_dir = tmp_path / "notebooks"
    nb_dir.mkdir()
    out = tmp_path / "out"
    _notebook(nb_dir / "good.ipynb", SAVE)
    _notebook(nb_dir / "broken.ipynb", "raise ValueError('boom in cell')")
    params = tmp_path / "params"
    params.mkdir()
    (params / "broken.yaml").write_text("value: 2\n")
    (params / "good.yaml").write_text("value: 3\n")
    code = batch.run_batch([str(params / "broken.yaml"), str(params / "good.yaml")],
                           output_dir=str(out), notebooks_dir=str(nb_dir))
    err = capsys.readouterr().err
    assert code == 1
    assert "broken.ipynb" in err and "boom in cell" in err
    assert (out / "t" / "x" / "good" / "report.html").exists()          # the good one still ran
    failed_report = out / "t" / "failed" / "broken" / "report.html"     # the broken one has a report too
    assert failed_report.exists() and "boom in cell" in failed_report.read_text()
    html = (out / "t" / "x" / "good" / "report.html").read_text()
    assert "Saved outputs to" in html and "print(f" not in html          # code cells are left out
    executed = nbformat.read(out / "t" / "notebooks" / "good.ipynb", as_version=4)
    assert any("value = 3" in c.source for c in executed.cells)          # parameters injected


def test_outputs_are_found_from_the_run_records_of_that_execution_only(tmp_path, capsys):
    from evekit.runs.records import RUN_RECORD, read_run_record, write_run_record

    nb_dir = tmp_path / "notebooks"
    nb_dir.mkdir()
    out = tmp_path / "out"
    stale = out / "t" / "x" / "earlier"                                  # a record left by an earlier run
    stale.mkdir(parents=True)
    write_run_record(stale, kind=KINDS["task"], notebook="good", run_name="t", files=[])
    _notebook(nb_dir / "good.ipynb", SAVE)
    (tmp_path / "good.yaml").write_text("value: 3\n")
    ok, dirs, run_dir = batch.run_one(tmp_path / "good.yaml", nb_dir, None, str(out), html=True)
    good = out / "t" / "x" / "good"
    assert ok and dirs == [good] and run_dir == out / "t"
    record = read_run_record(good / RUN_RECORD)
    assert (record.kind, record.notebook, record.run_name, record.files) == ("task", "good", "t", ("results.json",))
    assert record.execution and record.execution.startswith("good-")   # set by the runner for the kernel
    assert (good / "report.html").exists() and not (stale / "report.html").exists()
    assert "EVEKIT_EXECUTION" not in __import__("os").environ           # restored after the run


def test_notebook_that_saves_nothing_is_reported_clearly(tmp_path, capsys):
    nb_dir = tmp_path / "notebooks"
    nb_dir.mkdir()
    out = tmp_path / "out"
    # Printing the line is not saving: only a run.json record counts.
    _notebook(nb_dir / "quiet.ipynb", "print('Saved outputs to somewhere/else')")
    (tmp_path / "quiet.yaml").write_text("value: 1\n")
    code = batch.run_batch([str(tmp_path / "quiet.yaml")], output_dir=str(out), notebooks_dir=str(nb_dir))
    err = capsys.readouterr().err
    assert code == 0
    assert "quiet.ipynb with" in err and "saved no outputs (no run.json was written" in err
    assert (out / "t" / "failed" / "quiet" / "report.html").exists()
    assert "FAILED: quiet" in (out / "t" / "index.html").read_text()


def test_index_lists_results_with_intervals_and_failures(tmp_path):
    from evekit.batch.index import write_index
    from evekit.runs.records import write_run_record

    run_dir = tmp_path / "demo"
    d = run_dir / "m" / "mcqa_single_answer"
    d.mkdir(parents=True)
    (d / "results.json").write_text(json.dumps({
        "task": "mcqa_single_answer", "model": "m", "n": 40, "n_unparsed": 3, "n_failed": 1,
        "metrics": {"acc": {"value": 0.55, "ci_low": 0.4, "ci_high": 0.7, "n": 39}}}))
    (d / "report.html").write_text("<html></html>")
    write_run_record(d, kind=KINDS["task"], notebook="mcqa_single_answer", run_name="demo")
    forgotten = run_dir / "m" / "no_record"                             # results without a record: not listed
    forgotten.mkdir()
    (forgotten / "results.json").write_text((d / "results.json").read_text().replace("mcqa_single_answer", "nope"))
    s = run_dir / "summary"
    s.mkdir()
    (s / "report.html").write_text("<html></html>")
    write_run_record(s, kind=KINDS["summary"], notebook="summary", run_name="demo")
    (run_dir / "broken").mkdir()
    (run_dir / "broken" / "run.json").write_text("{not json")
    page = write_index(run_dir).read_text()
    assert "0.550 [0.40, 0.70]" in page
    assert ('<td><a href="m/mcqa_single_answer/report.html#explorer?outcome=unparsed">3</a></td>'
            '<td><a href="m/mcqa_single_answer/report.html#explorer?outcome=failed">1</a></td>') in page
    assert '<a href="m/mcqa_single_answer/report.html#metrics">0.550 [0.40, 0.70]</a>' in page
    assert 'href="m/mcqa_single_answer/report.html"' in page
    assert "nope" not in page
    assert 'href="summary/report.html">summary leaderboard' in page
    assert "unreadable: broken/run.json" in page


def test_run_record_schema(tmp_path):
    from evekit.runs.records import read_run_record, write_run_record

    (tmp_path / "a.csv").write_text("x\n")
    (tmp_path / "report.html").write_text("")
    path = write_run_record(tmp_path, kind=KINDS["win_rate"], notebook="win_rate", run_name="r", model_a="a")
    data = json.loads(path.read_text())
    assert {"kind", "notebook", "run_name", "output_dir", "files", "created"} <= set(data)
    assert data["files"] == ["a.csv"] and data["model_a"] == "a"       # None: every file there but report/run.json
    assert read_run_record(path).details["model_a"] == "a"
    assert set(KINDS) == {"task", "win_rate", "ranking", "summary", "judge_validation"}
    with pytest.raises(TypeError, match="must be a RunKind"):
        write_run_record(tmp_path, kind="other", notebook="n", run_name="r")


def llama_pids() -> set[int]:
    """The llama.cpp server processes this test process started (to check that none outlives a run)."""
    import os

    from conftest import llama_server_pids

    return llama_server_pids(os.getpid())


@pytest.mark.integration
def test_embedded_server_is_stopped_even_when_a_notebook_fails(tmp_path, capsys):
    import subprocess

    from conftest import _local_extra_missing

    if reason := _local_extra_missing():
        pytest.skip(reason)

    before = llama_pids()
    nb_dir = tmp_path / "notebooks"
    nb_dir.mkdir()
    _notebook(nb_dir / "broken.ipynb", "import os\nprint(os.environ['EVEKIT_SERVER_URL'])\nraise RuntimeError('late failure')")
    (tmp_path / "broken.yaml").write_text('value: "${EVEKIT_SERVER_URL}"\n')
    code = batch.run_batch([str(tmp_path / "broken.yaml")], serve=True, output_dir=str(tmp_path / "out"),
                           notebooks_dir=str(nb_dir))
    captured = capsys.readouterr()
    assert code == 1 and "late failure" in captured.err
    assert "embedded server stopped" in captured.out
    assert llama_pids() <= before


@pytest.mark.integration
def test_sigterm_on_evekit_run_stops_the_embedded_server(tmp_path):
    import signal
    import subprocess
    import sys
    import time

    from conftest import _local_extra_missing

    if reason := _local_extra_missing():
        pytest.skip(reason)

    nb_dir = tmp_path / "notebooks"
    nb_dir.mkdir()
    _notebook(nb_dir / "slow.ipynb", "import time\ntime.sleep(120)")
    (tmp_path / "slow.yaml").write_text("value: 2\n")
    proc = subprocess.Popen([sys.executable, "-m", "evekit.cli", "run", "--serve", "--notebooks-dir", str(nb_dir),
                             "--output-dir", str(tmp_path / "out"), str(tmp_path / "slow.yaml")],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines = []
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:  # wait until the notebook runs, the server being up
        line = proc.stdout.readline()
        lines.append(line)
        if "running slow" in line:
            break
    assert any("embedded model" in line for line in lines), "".join(lines)
    from conftest import llama_server_pids

    servers = llama_server_pids(proc.pid)  # the server is a child of `evekit run`, a grandchild of ours
    assert len(servers) == 1, "".join(lines)
    time.sleep(2)
    proc.send_signal(signal.SIGTERM)
    rest, _ = proc.communicate(timeout=60)
    assert proc.returncode == 130, "".join(lines) + rest
    assert "embedded server stopped" in rest
    deadline = time.monotonic() + 10
    while servers & llama_server_pids() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not servers & llama_server_pids(), "llama-server left behind after SIGTERM"


def test_bad_parameter_files_stop_the_batch_before_anything_runs(tmp_path, capsys):
    nb_dir = tmp_path / "notebooks"
    nb_dir.mkdir()
    out = tmp_path / "out"
    _notebook(nb_dir / "good.ipynb", SAVE)
    params = tmp_path / "params"
    params.mkdir()
    (params / "good.yaml").write_text("value: 3\n")                      # fine, but must not run
    (params / "good.typo.yaml").write_text("valeu: 3\nrun_name: t\n")
    (params / "nosuch.yaml").write_text("value: 1\n")
    (params / "good.list.yaml").write_text("- 1\n- 2\n")
    files = [params / n for n in ("good.yaml", "good.typo.yaml", "nosuch.yaml", "good.list.yaml")]
    code = batch.run_batch([*map(str, files), str(params / "missing.yaml")],
                           output_dir=str(out), notebooks_dir=str(nb_dir))
    err = capsys.readouterr().err
    assert code == 2 and not out.exists()                                  # nothing ran, nothing written
    assert "good.typo.yaml: notebook good: unknown parameter 'valeu' (did you mean 'value'?)" in err
    assert "nosuch.yaml: no notebook 'nosuch'" in err and "notebooks: good" in err
    assert "good.list.yaml: expected a mapping" in err
    assert "missing.yaml: no such file" in err
    assert "Traceback" not in err and "nothing was run (4 problem(s)" in err


# -- what a report is, the batch's other runs, progress, the kernel's noise ---------------------------

REPRO = ("from pathlib import Path\nfrom evekit.runs.records import write_run_record\nfrom evekit.runs.registry import KINDS\nimport json\n"
         "d = Path(output_dir) / run_name / 'm' / 'open_ended'\nd.mkdir(parents=True, exist_ok=True)\n"
         "(d / 'results.json').write_text(json.dumps({'task': 'open_ended', 'model': 'my-model', 'n': 1,\n"
         "    'params': {'num_fewshot': num_fewshot}, 'metrics': {}}))\n"
         "write_run_record(d, kind=KINDS['task'], notebook='open_ended', run_name=run_name, files=['results.json'])")


def _task_notebook(path: Path, body: str) -> None:
    from nbformat.v4 import new_markdown_cell

    params = new_code_cell('run_name = "t"\noutput_dir = "outputs"\nnum_fewshot = 0')
    params.metadata["tags"] = ["parameters"]
    nb = new_notebook(cells=[
        new_markdown_cell("# Open-ended\nBatch: `papermill notebooks/open_ended.ipynb out.ipynb "
                          "-f params/demo/open_ended.yaml`."),
        params, new_code_cell(body)])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, path)


def test_report_names_its_run_model_fewshot_and_the_real_parameter_file(tmp_path):
    nb_dir = tmp_path / "notebooks"
    nb_dir.mkdir()
    _task_notebook(nb_dir / "open_ended.ipynb", REPRO)
    f = tmp_path / "open_ended.5shot.yaml"
    f.write_text("run_name: demo-5shot\nnum_fewshot: 5\nmodel_name: my-model\nbase_url: http://127.0.0.1:9/v1\n")
    ok, dirs, _ = batch.run_one(f, nb_dir, None, str(tmp_path / "out"), html=True, progress_every=0)
    assert ok and dirs
    html = (dirs[0] / "report.html").read_text()
    assert "<title>demo-5shot · open_ended · my-model · 5-shot</title>" in html
    assert "5-shot" in html and "my-model" in html
    assert f"-f {f}" in html                          # the file it ran with (outside the repo: as given)
    assert "params/demo/open_ended.yaml" not in html  # the notebook's default file is corrected


def test_index_links_the_other_runs_of_the_batch(tmp_path):
    nb_dir = tmp_path / "notebooks"
    nb_dir.mkdir()
    _task_notebook(nb_dir / "open_ended.ipynb", REPRO)
    (tmp_path / "open_ended.yaml").write_text("run_name: demo\nmodel_name: my-model\nbase_url: http://127.0.0.1:9/v1\n")
    (tmp_path / "open_ended.5shot.yaml").write_text("run_name: demo-5shot\nnum_fewshot: 5\nmodel_name: my-model\nbase_url: http://127.0.0.1:9/v1\n")
    out = tmp_path / "out"
    code = batch.run_batch([str(tmp_path / "open_ended.yaml"), str(tmp_path / "open_ended.5shot.yaml")],
                           output_dir=str(out), notebooks_dir=str(nb_dir), progress_every=0)
    assert code == 0
    demo, five = (out / "demo" / "index.html").read_text(), (out / "demo-5shot" / "index.html").read_text()
    assert "Other runs of this batch" in demo and 'href="../demo-5shot/index.html"' in demo
    assert 'href="../demo/index.html"' in five and 'href="../demo-5shot/index.html"' not in five
    assert "embedded demo model" not in demo      # the caveat only when the demo model is on the board


def test_a_slow_notebook_reports_progress_and_the_kernel_noise_is_filtered(tmp_path, capfd):
    nb_dir = tmp_path / "notebooks"
    nb_dir.mkdir()
    _notebook(nb_dir / "slow.ipynb", "import time\ntime.sleep(3)\n" + SAVE)
    (tmp_path / "slow.yaml").write_text("value: 2\n")
    code = batch.run_batch([str(tmp_path / "slow.yaml")], output_dir=str(tmp_path / "out"),
                           notebooks_dir=str(nb_dir), progress_every=0.5)
    out, err = capfd.readouterr()      # capfd: the kernel process writes to the real file descriptors
    assert code == 0
    lines = [line for line in out.splitlines() if line.startswith("  … slow:")]
    assert len(lines) >= 3, out
    assert any("cell 3 of 3" in line for line in lines), lines   # parameters, injected parameters, the body
    assert "without encryption" not in out + err
    assert "KeyboardInterrupt caught in kernel" not in out + err


def test_kernel_stderr_keeps_real_errors_and_drops_only_the_noise(capsys):
    import sys

    batch.forward_kernel_stderr("[IPKernelApp] WARNING | Kernel is running over TCP without encryption. All ...\n"
                                "Traceback (most recent call last):\nMemoryError\n"
                                "[IPKernelApp] ERROR | KeyboardInterrupt caught in kernel.\n", sys.stderr)
    err = capsys.readouterr().err
    assert "Traceback" in err and "MemoryError" in err
    assert "encryption" not in err and "KeyboardInterrupt" not in err


def test_elapsed_time_reads_like_a_clock():
    assert [batch.format_elapsed(s) for s in (5, 130, 3725)] == ["5 s", "2 min 10 s", "1 h 2 min"]


def test_papermill_saves_are_throttled_and_the_closing_save_has_every_output(tmp_path, monkeypatch):
    """The batch's papermill engine writes the executed notebook at its start and at its end, and
    while cells run at most every SAVE_EVERY seconds (papermill's own: at every cell's start and
    end); the notebook it leaves holds every cell's output and status."""
    import nbformat
    import papermill as pm
    import papermill.engines as engines
    from nbformat.v4 import new_code_cell, new_notebook

    from evekit.batch import execute

    execute._register_atomic_notebooks()
    monkeypatch.setattr(execute, "SAVE_EVERY", 3600.0)
    writes: list[str] = []
    real_write = engines.write_ipynb

    def counting_write(nb, path):
        writes.append(path)
        real_write(nb, path)

    monkeypatch.setattr(engines, "write_ipynb", counting_write)
    source, executed = tmp_path / "four.ipynb", tmp_path / "out" / "four.ipynb"
    executed.parent.mkdir()
    nb = new_notebook(cells=[new_code_cell(f"print({i} * 7)") for i in range(4)])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, source)
    pm.execute_notebook(str(source), execute.ATOMIC_SCHEME + str(executed), kernel_name="python3",
                        progress_bar=False, engine_name=execute.THROTTLED_ENGINE)
    assert len(writes) == 2  # papermill's own engine: 2 + 2 per cell = 10
    saved = nbformat.read(executed, as_version=4)
    assert [c.outputs[0]["text"] for c in saved.cells] == ["0\n", "7\n", "14\n", "21\n"]
    assert {c.metadata.papermill["status"] for c in saved.cells} == {"completed"}
    assert saved.metadata.papermill["duration"] is not None
