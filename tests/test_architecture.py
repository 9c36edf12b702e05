"""The layering of docs/ARCHITECTURE.md holds: import-linter's contracts (pyproject.toml) are kept,
and no two evekit modules import each other, directly or through others (lazy imports count)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import grimp

from evekit.paths import REPO_ROOT


def test_import_linter_contracts_are_kept():
    lint = Path(sys.executable).parent / "lint-imports"
    done = subprocess.run([str(lint), "--no-cache"], cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 broken" in done.stdout


def _cycle(graph: grimp.ImportGraph, package: str) -> list[str] | None:
    """One import cycle among the modules of `package` in `graph` (depth-first search), or None."""
    modules = sorted(graph.modules)
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(module: str) -> list[str] | None:
        state[module] = 1
        path.append(module)
        for dep in sorted(graph.find_modules_directly_imported_by(module)):
            if not dep.startswith(package):
                continue
            if state.get(dep) == 1:
                return path[path.index(dep):] + [dep]
            if state.get(dep) is None and (found := visit(dep)):
                return found
        path.pop()
        state[module] = 2
        return None

    for module in modules:
        if state.get(module) is None and (found := visit(module)):
            return found
    return None


def test_no_import_cycle():
    graph = grimp.build_graph("evekit", cache_dir=None)
    assert _cycle(graph, "evekit") is None, " -> ".join(_cycle(graph, "evekit") or [])


def test_cycle_finder_finds_a_cycle(tmp_path, monkeypatch):
    pkg = tmp_path / "cyclepkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from cyclepkg import b\n")
    (pkg / "b.py").write_text("def f():\n    from cyclepkg import a\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    graph = grimp.build_graph("cyclepkg", cache_dir=None)
    assert _cycle(graph, "cyclepkg") in (["cyclepkg.a", "cyclepkg.b", "cyclepkg.a"],
                                         ["cyclepkg.b", "cyclepkg.a", "cyclepkg.b"])
    (pkg / "b.py").write_text("def f():\n    return 1\n")
    assert _cycle(grimp.build_graph("cyclepkg", cache_dir=None), "cyclepkg") is None
