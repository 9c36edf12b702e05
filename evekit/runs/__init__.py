"""Notebook kinds: one folder per kind (`task`, `win_rate`, `ranking`, `judge_validation`, `summary`), all
of one shape, and the registry of them (`registry.KINDS`).

- `params`: the `Params` base; each parameter declared once (type, default, help, bounds);
- `kind`: `RunKind`, the facts of a kind the batch runner, the index and `evekit plan` use;
- `records`: run.json, the record each save step leaves;
- `base`: `NotebookRun`, what every kind's runner shares (clients, the judge panel, caveats);
- `<kind>/`: its `params`, its runner (`run`), its `kind` entry, and its own views.
"""
