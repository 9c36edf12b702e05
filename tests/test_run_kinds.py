"""A notebook kind is one concept (evekit.runs): one parameter base, one registry, no kind name spelt
out elsewhere, and a batch that schedules every kind by what it reads."""
from __future__ import annotations

import ast
import itertools
import sys
from dataclasses import fields
from pathlib import Path

import nbformat
import pytest
import yaml

from evekit.errors import ParameterError
from evekit.paths import REPO_ROOT
from evekit.runs.params import Params
from evekit.runs.registry import KINDS, kind_of_notebook, notebooks

sys.path.insert(0, str(REPO_ROOT / "scripts"))


def _build_notebooks():
    import build_notebooks

    return build_notebooks


def _parameters_cell(nb) -> str:
    return next(c.source for c in nb.cells if "parameters" in c.get("metadata", {}).get("tags", []))


def _assignments(source: str) -> list[tuple[str, object]]:
    tree = ast.parse(source)
    return [(n.targets[0].id, ast.literal_eval(n.value)) for n in tree.body if isinstance(n, ast.Assign)]


def test_every_shipped_notebook_has_a_kind_and_every_kind_its_notebooks():
    shipped = {p.stem for p in (REPO_ROOT / "notebooks").glob("*.ipynb")}
    assert shipped == set(notebooks())
    assert [k.phase for k in KINDS.values()] == sorted(k.phase for k in KINDS.values())
    with pytest.raises(ParameterError, match="no notebook 'open_ende'.*open_ended"):
        kind_of_notebook("open_ende")


def test_a_parameter_shared_by_kinds_has_one_definition_and_one_default():
    by_name: dict[str, list[type[Params]]] = {}
    for kind in KINDS.values():
        for f in fields(kind.params):
            by_name.setdefault(f.name, []).append(kind.params)
    shared = {name: classes for name, classes in by_name.items() if len(classes) > 1}
    # The parameters every kind that calls models or judges has: one declaration each.
    assert {"seed", "judges", "concurrency", "timeout", "max_retries", "cache_dir", "offline", "run_name",
            "output_dir", "limit", "task", "both_orders", "judge_validation"} <= set(shared)
    for name, classes in shared.items():
        declared = [c.__dataclass_fields__[name] for c in classes]
        assert all(d is declared[0] for d in declared), f"{name} is declared more than once"
        assert len({repr(c.defaults().get(name, "<required>")) for c in classes}) == 1, name
    assert {c.defaults()["seed"] for c in (k.params for k in KINDS.values())} == {1234}
    assert {c.defaults()["cache_dir"] for k in KINDS.values() if "cache_dir" in (c := k.params).defaults()} \
        == {"outputs/cache"}


def test_every_parameter_has_its_help_group_and_a_checkable_type():
    for kind in KINDS.values():
        for f in fields(kind.params):
            assert f.metadata.get("help"), f"{kind.name}.{f.name} has no help line"
            assert f.metadata.get("group"), f"{kind.name}.{f.name} has no group"
        # Every default passes the declared checks (a wrong default would fail every notebook).
        assert kind.params.defaults()


@pytest.mark.parametrize("notebook", sorted(notebooks()))
def test_parameters_cell_is_generated_from_the_kind_and_matches_the_committed_notebook(notebook):
    bn = _build_notebooks()
    kind = kind_of_notebook(notebook)
    variant = kind.variant(notebook)
    builders = {"custom_task": bn.build_custom, "summary": bn.build_summary, "ranking": bn.build_ranking,
                "judge_validation": bn.build_judge_validation, "win_rate": bn.build_win_rate}
    nb = builders[notebook]() if notebook in builders else bn.build(notebook, bn.TASKS[notebook])
    source = _parameters_cell(nb)
    generated = _assignments(source)
    names = [name for name, _ in generated]
    assert names == [f.name for f in kind.params.parameters(variant)]   # each parameter once, nothing else
    assert all(f.metadata["help"] in source or f.name in {*bn.CUSTOM_COMMENTS, "dataset"} for f in kind.params.parameters(variant))
    values = dict(generated)
    kind.params.from_dict({**kind.implied(notebook, values), **values})  # the demo values are valid
    committed = nbformat.read(REPO_ROOT / "notebooks" / f"{notebook}.ipynb", as_version=4)
    assert dict(_assignments(_parameters_cell(committed))) == values     # same names and values
    first_code = next(c.source for c in committed.cells if c.cell_type == "code" and "parameters" not in
                      c.get("metadata", {}).get("tags", []))
    runner = kind.runner.split(":")
    assert f"from {runner[0].rsplit('.', 1)[0]} import {runner[1]}" in first_code
    assert f"{runner[1]}.from_notebook(globals())" in first_code


def test_renamed_parameters_say_their_new_name():
    from evekit.runs.win_rate.params import WinRateParams

    with pytest.raises(ParameterError, match="'temperature' is now 'judge_temperature'"):
        WinRateParams.from_dict({"task": "open_ended", "model_a": [], "model_b": [], "temperature": 0.2})


# -- no kind name spelt out outside its entry ---------------------------------------------------
def _kind_literal_uses(path: Path, names: set[str]) -> list[str]:
    """String constants equal to a kind's name used as a kind: compared with, passed as `kind=`,
    a key of a table of numbers (a phase table), or a member of a literal tested with `in`."""
    tree = ast.parse(path.read_text())
    found = []
    for node in ast.walk(tree):
        hits: list[ast.AST] = []
        if isinstance(node, ast.Compare):
            if any(isinstance(op, (ast.In, ast.NotIn)) for op in node.ops):
                # `kind in ("a", "b")` is a use; `"task" in results` looks a key up
                hits += [e for part in node.comparators for e in getattr(part, "elts", [])]
            else:
                hits += [part for part in [node.left, *node.comparators] if isinstance(part, ast.Constant)]
        elif isinstance(node, ast.keyword) and node.arg == "kind":
            hits.append(node.value)
        elif isinstance(node, ast.Dict):
            hits += [k for k, v in zip(node.keys, node.values)
                     if isinstance(v, ast.Constant) and isinstance(v.value, int) and not isinstance(v.value, bool)]
        for hit in hits:
            if isinstance(hit, ast.Constant) and hit.value in names:
                found.append(f"{path}:{hit.lineno}: {hit.value!r}")
    return found


def test_no_kind_name_is_spelt_out_outside_its_registry_entry():
    names = set(KINDS)
    allowed = {REPO_ROOT / "evekit" / "runs" / "registry.py"} | set((REPO_ROOT / "evekit" / "runs").glob("*/kind.py"))
    found = [hit for path in sorted((REPO_ROOT / "evekit").rglob("*.py")) if path not in allowed
             for hit in _kind_literal_uses(path, names)]
    assert found == []


def test_the_literal_finder_finds_kind_names(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text('PHASES = {"win_rate": 2}\nif kind == "summary":\n    pass\nrecord(kind="ranking")\n'
                   'ok = name in ("judge_validation", "x")\n')
    assert len(_kind_literal_uses(bad, set(KINDS))) == 4


# -- scheduling: a run waits for the runs that write what it reads -------------------------------
JUDGES = [{"name": "j", "model": "m", "base_url": "http://127.0.0.1:9/v1", "api_key_env": None}]


def _write(path: Path, values: dict) -> Path:
    path.write_text(yaml.safe_dump(values))
    return path


def _batch(tmp_path: Path, *, judge_validation: bool):
    """A judge validation, two task runs and a win rate (and a ranking) that read the tasks' answers."""
    from evekit.batch.paramfiles import read_run_file

    out = tmp_path / "out"
    client = {"cache_dir": str(tmp_path / "cache"), "output_dir": str(out)}
    files = [
        _write(tmp_path / "judge_validation.yaml", {"judges": JUDGES, "judge_kind": "pairwise", "run_name": "d",
                                                    **client}),
        _write(tmp_path / "open_ended.yaml", {"model_name": "m", "base_url": "http://127.0.0.1:9/v1", "run_name": "d",
                                              "limit": 2, **client}),
        _write(tmp_path / "open_ended.5shot.yaml", {"model_name": "m", "base_url": "http://127.0.0.1:9/v1",
                                                    "run_name": "d5", "num_fewshot": 5, "limit": 2, **client}),
    ]
    answers = [{"name": "zero", "file": str(out / "d" / "m" / "open_ended" / "samples.csv")},
               {"name": "five", "file": str(out / "d5" / "m" / "open_ended" / "samples.csv")}]
    validation = {"judge_validation": str(out / "d" / "judge_validation" / "pairwise" / "results.json")} \
        if judge_validation else {}
    files.append(_write(tmp_path / "win_rate.yaml", {"task": "open_ended", "model_a": answers[:1],
                                                     "model_b": answers[1:], "judges": JUDGES, "run_name": "d",
                                                     **validation, **client}))
    files.append(_write(tmp_path / "ranking.yaml", {"task": "open_ended", "models": answers, "judges": JUDGES,
                                                    "run_name": "d", **validation, **client}))
    return [read_run_file(f, REPO_ROOT / "notebooks", check_files=False) for f in files], out


@pytest.mark.parametrize("judge_validation", [True, False])
def test_a_win_rate_or_ranking_waits_for_the_runs_that_write_its_answer_files(tmp_path, judge_validation):
    from evekit.batch.schedule import waits_for

    files, out = _batch(tmp_path, judge_validation=judge_validation)
    needs = waits_for(files)
    jv, zero, five, win_rate, ranking = (f.path for f in files)
    written = {jv: [out / "d" / "judge_validation" / "pairwise"]}
    # Judge validation done, the task runs not: neither comparison may start.
    assert not needs[win_rate].met(written) and not needs[ranking].met(written)
    written[zero] = [out / "d" / "m" / "open_ended"]
    assert not needs[win_rate].met(written) and not needs[ranking].met(written)  # one answer file still missing
    written[five] = [out / "d5" / "m" / "open_ended"]
    assert needs[win_rate].met(written) and needs[ranking].met(written)
    # The task runs read nothing the batch writes: they wait for nothing.
    assert needs[zero].met({}) and needs[five].met({})


def test_every_pair_of_kinds_is_ordered_by_phase():
    for a, b in itertools.combinations(KINDS.values(), 2):
        assert (a.phase <= b.phase), (a.name, b.name)
