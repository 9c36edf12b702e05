"""Batch runs with papermill: order, parameter files, failures reported, HTML written."""
from __future__ import annotations

import json
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook

from evekit import batch


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


def test_server_url_placeholder_is_filled_in_everywhere(tmp_path):
    f = tmp_path / "open_ended.yaml"
    f.write_text('base_url: "${EVEKIT_SERVER_URL}"\njudges:\n  - {name: j, base_url: "${EVEKIT_SERVER_URL}"}\n')
    params = batch.load_params(f, "http://127.0.0.1:9/v1")
    assert params["base_url"] == "http://127.0.0.1:9/v1"
    assert params["judges"][0]["base_url"] == "http://127.0.0.1:9/v1"
    with pytest.raises(ValueError, match="--serve"):
        batch.load_params(f, None)


def test_failed_notebook_is_named_exit_code_is_nonzero_and_others_still_run(tmp_path, capsys):
    nb_dir = tmp_path / "notebooks"
    nb_dir.mkdir()
    out = tmp_path / "out"
    save = ("from pathlib import Path\nd = Path(output_dir) / run_name / 'x' / 'good'\n"
            "d.mkdir(parents=True, exist_ok=True)\n(d / 'results.json').write_text('{}')\n"
            "print(f'Saved outputs to {d}')")
    _notebook(nb_dir / "good.ipynb", save)
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


def test_index_lists_results_with_intervals_and_failures(tmp_path):
    from evekit.report import write_index

    run_dir = tmp_path / "demo"
    d = run_dir / "m" / "mcqa_single_answer"
    d.mkdir(parents=True)
    (d / "results.json").write_text(json.dumps({
        "task": "mcqa_single_answer", "model": "m", "n": 40, "n_unparsed": 3, "n_failed": 1,
        "metrics": {"acc": {"value": 0.55, "ci_low": 0.4, "ci_high": 0.7, "n": 39}}}))
    (d / "report.html").write_text("<html></html>")
    page = write_index(run_dir).read_text()
    assert "0.550 [0.40, 0.70]" in page
    assert "<td>3</td><td>1</td>" in page
    assert 'href="m/mcqa_single_answer/report.html"' in page


@pytest.mark.integration
def test_embedded_server_is_stopped_even_when_a_notebook_fails(tmp_path, capsys):
    import subprocess

    from conftest import _local_extra_missing

    if reason := _local_extra_missing():
        pytest.skip(reason)

    def llama_pids() -> set[str]:
        out = subprocess.run(["pgrep", "-f", "llama_cpp.server"], capture_output=True, text=True).stdout
        return set(out.split())

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
