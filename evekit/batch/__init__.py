"""Batch runs of the notebooks (`evekit run`, `plan`, `batch export/import`).

- `paramfiles`: `<notebook>[.<variant>].yaml`, read and checked before anything runs;
- `schedule`: phases, what each file waits for, runs side by side (`--jobs`), endpoint limits;
- `execute`: papermill for one file (`run_one`) and the batch (`run_batch`), progress, Ctrl-C;
- `kernels`: the warm kernel server and the kernel managers;
- `html`: report.html from an executed notebook;
- `plan`: the calls a set of runs would send, counted and priced;
- `batchfile`: OpenAI Batch input and output files.
"""
from evekit.batch.execute import PROGRESS_EVERY, format_elapsed, run_batch, run_one, saved_output_dirs
from evekit.batch.html import render_html, report_identity, report_title
from evekit.batch.kernels import forward_kernel_stderr, stop_kernels
from evekit.batch.paramfiles import SERVER_URL_PLACEHOLDER, check_param_files, load_params, notebook_name
from evekit.batch.schedule import Needs, _run_scheduled, endpoint_limits, inputs_of, phases, run_order, waits_for

__all__ = ["run_batch", "run_one", "saved_output_dirs", "format_elapsed", "PROGRESS_EVERY", "render_html",
           "report_identity", "report_title", "forward_kernel_stderr", "stop_kernels", "SERVER_URL_PLACEHOLDER",
           "check_param_files", "load_params", "notebook_name", "Needs", "endpoint_limits", "inputs_of", "phases",
           "run_order", "waits_for", "_run_scheduled"]
