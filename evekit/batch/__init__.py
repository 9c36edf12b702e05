"""Batch runs of the notebooks (`evekit run`, `plan`, `batch export/import`).

- `paramfiles`: `<notebook>[.<variant>].yaml`, read and checked before anything runs;
- `schedule`: phases, what each file waits for, runs side by side (`--jobs`), endpoint limits;
- `execute`: papermill for one file (`run_one`) and the batch (`run_batch`), progress, Ctrl-C;
- `kernels`: the warm kernel server and the kernel managers;
- `html`: report.html from an executed notebook;
- `plan`: the calls a set of runs would send, counted and priced;
- `batchfile`: OpenAI Batch input and output files.
"""
# The names below are looked up when first used (PEP 562): a forked kernel imports
# `evekit.batch.kernels` alone, and must not import the rest of evekit with it.
_HOMES = {
    "execute": ("PROGRESS_EVERY", "format_elapsed", "run_batch", "run_one", "saved_output_dirs"),
    "html": ("render_html", "report_identity", "report_title"),
    "kernels": ("forward_kernel_stderr", "stop_kernels"),
    "paramfiles": ("SERVER_URL_PLACEHOLDER", "RunFile", "check_param_files", "load_params", "notebook_name",
                   "read_run_file"),
    "schedule": ("Needs", "_run_scheduled", "endpoint_limits", "inputs_of", "phases", "run_order", "waits_for"),
}
_WHERE = {name: module for module, names in _HOMES.items() for name in names}
__all__ = sorted(_WHERE)


def __getattr__(name: str):
    import importlib

    if name in _WHERE:
        return getattr(importlib.import_module(f"evekit.batch.{_WHERE[name]}"), name)
    raise AttributeError(f"module 'evekit.batch' has no attribute {name!r}")
