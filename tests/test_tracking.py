"""Experiment tracking (evekit.tracking): what a run logs, read back with each library's own reader.

MLflow through `MlflowClient` on the local SQLite store a run creates; W&B through its offline run
files (the `.wandb` transaction log, parsed into `wandb_internal_pb2.Record`s, and the media files
beside it). The runs are real: a task run, a win rate and a ranking against the stub server over
HTTP. No secret reaches either tracker; a tracker that cannot reach its server changes nothing.
"""
from __future__ import annotations

import json
import socket
import struct
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from evekit.errors import ParameterError
from evekit.tracking import (EVE_SAMPLE_COLUMNS, TrackingConfig, default_mlflow_uri, describe, safe_key,
                             samples_table)

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from stub_server import StubServer  # noqa: E402

pytestmark = pytest.mark.tracking
mlflow = pytest.importorskip("mlflow", reason="needs the evekit[tracking] extra (pip install 'evekit[tracking]')")
wandb = pytest.importorskip("wandb", reason="needs the evekit[tracking] extra (pip install 'evekit[tracking]')")

SENTINEL = "sk-evekit-sentinel-7f3a9c1e5b"  # the model's and the judge's key: sent, never logged
OTHER_SECRET = "evekit-unrelated-secret-42d1"  # an environment value nothing should copy
MODEL = "stub-model"
NOTES = "EVE's wandb.notes: strong vs middle on the stub, two judges"


@pytest.fixture(autouse=True)
def _isolated(tmp_path, monkeypatch):
    """Trackers' own folders inside tmp_path; no tracking server or batch from the environment."""
    for name in ("MLFLOW_TRACKING_URI", "WANDB_MODE", "WANDB_DIR", "EVEKIT_EXECUTION", "EVEKIT_BATCH",
                 "WANDB_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    for name in ("WANDB_DATA_DIR", "WANDB_CACHE_DIR", "WANDB_CONFIG_DIR", "WANDB_ARTIFACT_DIR"):
        monkeypatch.setenv(name, str(tmp_path / "wandb-home" / name.lower()))
    monkeypatch.setenv("EVEKIT_TEST_KEY", SENTINEL)
    monkeypatch.setenv("EVEKIT_UNRELATED_TOKEN", OTHER_SECRET)


# --------------------------------------------------------------------------- runs
def _open_ended_file(tmp_path: Path, n: int = 6) -> Path:
    tmp_path.mkdir(parents=True, exist_ok=True)
    path = tmp_path / "oe.jsonl"
    path.write_text("".join(json.dumps({"Question": f"What does Sentinel-{i} observe?", "Topic": f"t{i % 2}",
                                        "Answer": f"band {i} radiance"}) + "\n" for i in range(n)))
    return path


def task_run(tmp_path: Path, stub: StubServer, tracking, **extra) -> Path:
    """open_ended, one model and one judge on the stub (with the sentinel key), saved and tracked."""
    from evekit.runs.task.run import TaskRun

    judge = {"name": "j1", "model": "stub-judge", "base_url": stub.base_url, "api_key_env": "EVEKIT_TEST_KEY"}
    run = TaskRun.from_params(task="open_ended", model_name=MODEL, base_url=stub.base_url,
                              api_key_env="EVEKIT_TEST_KEY", dataset=str(_open_ended_file(tmp_path)),
                              judges=[judge], num_fewshot=0, cache_dir=str(tmp_path / "cache"),
                              output_dir=str(tmp_path / "out"), run_name="t", tracking=tracking, **extra)
    run.load()
    run.generate()
    run.judge()
    run.compute_metrics()
    run.plots()
    return run.save()


STRENGTH = {"strong": 6, "middle": 3, "weak": 0}


def answer_files(tmp_path: Path, n: int = 8) -> list[dict]:
    tmp_path.mkdir(parents=True, exist_ok=True)
    qs = [f"What does band {i} of the sensor measure?" for i in range(n)]
    out = []
    for name, s in STRENGTH.items():
        path = tmp_path / f"{name}.csv"
        pd.DataFrame({"doc_id": range(n), "doc.Question": qs, "target": "reference",
                      "filtered_resps": [f"answer of {name}: band {i} [[strength_{s}]]" for i in range(n)]}
                     ).to_csv(path, index=False)
        out.append({"name": name, "file": str(path)})
    return out


def _pairwise_judges(stub: StubServer) -> list[dict]:
    return [{"name": f"s{i}", "model": f"stub-{i}", "base_url": stub.base_url, "api_key_env": "EVEKIT_TEST_KEY"}
            for i in (1, 2)]


def win_rate_run(tmp_path: Path, stub: StubServer, tracking) -> list[Path]:
    from evekit.runs.win_rate.run import WinRateRun

    models = answer_files(tmp_path)
    run = WinRateRun.from_params(task="open_ended", model_a=models[:1], model_b=models[1:2],
                                 judges=_pairwise_judges(stub), cache_dir=str(tmp_path / "cache"),
                                 output_dir=str(tmp_path / "out"), run_name="t", tracking=tracking)
    run.load()
    run.judge()
    return run.save()


def ranking_run(tmp_path: Path, stub: StubServer, tracking) -> Path:
    from evekit.runs.ranking.run import RankingRun

    run = RankingRun.from_params(task="open_ended", models=answer_files(tmp_path), judges=_pairwise_judges(stub),
                                 n_boot=50, cache_dir=str(tmp_path / "cache"), output_dir=str(tmp_path / "out"),
                                 run_name="t", tracking=tracking)
    run.load()
    run.plan()
    run.judge()
    run.rate()
    return run.save()


# --------------------------------------------------------------------------- readers
def mlflow_client(out_root: Path):
    from mlflow.tracking import MlflowClient

    return MlflowClient(tracking_uri=default_mlflow_uri(out_root))


def mlflow_runs(out_root: Path) -> list:
    client = mlflow_client(out_root)
    exp = client.get_experiment_by_name("evekit")
    assert exp is not None, "no experiment 'evekit' in the local store"
    return client.search_runs([exp.experiment_id])


def mlflow_table(client, run_id: str, name: str) -> pd.DataFrame:
    """A table `MlflowClient.log_table` wrote, as MLflow stores it ({"columns", "data"})."""
    local = client.download_artifacts(run_id, f"tables/{name}.json")
    data = json.loads(Path(local).read_text())
    return pd.DataFrame(data["data"], columns=data["columns"])


def mlflow_artifacts(client, run_id: str, path: str | None = None) -> list[str]:
    out = []
    for a in client.list_artifacts(run_id, path):
        out += mlflow_artifacts(client, run_id, a.path) if a.is_dir else [a.path]
    return out


BLOCK = 32768  # the LevelDB log framing of W&B's transaction log: 32 KiB blocks, 7-byte chunk headers


def wandb_records(path: Path) -> list:
    """Every `Record` of a `.wandb` file (W&B's own protobuf schema; FULL/FIRST/MIDDLE/LAST chunks)."""
    from wandb.proto import wandb_internal_pb2 as pb

    data = path.read_bytes()
    assert data[:4] == b":W&B", f"{path}: not a W&B transaction log"
    pos, buf, out = 7, b"", []
    while pos + 7 <= len(data):
        left = BLOCK - pos % BLOCK
        if left < 7:
            pos += left
            continue
        _crc, length, kind = struct.unpack("<IHB", data[pos:pos + 7])
        if length == 0 and kind == 0:  # the zero padding at a block's end
            pos += left
            continue
        chunk, pos = data[pos + 7:pos + 7 + length], pos + 7 + length
        if kind in (2, 3):
            buf = (buf if kind == 3 else b"") + chunk
            continue
        record = pb.Record()
        record.ParseFromString((buf + chunk) if kind == 4 else chunk)
        out.append(record)
        buf = b""
    return out


class WandbRun:
    """One offline W&B run as its files hold it: the run record, config, history, summary, media."""

    def __init__(self, sync_dir: Path) -> None:
        self.dir = sync_dir
        (log,) = sync_dir.glob("run-*.wandb")
        self.records = wandb_records(log)
        kinds = [r.WhichOneof("record_type") for r in self.records]
        self.run = next(r.run for r, k in zip(self.records, kinds) if k == "run")
        self.config = {i.key: json.loads(i.value_json) for i in self.run.config.update}
        self.history: dict[str, object] = {}
        for r, k in zip(self.records, kinds):
            if k == "history":
                self.history.update({i.key or "/".join(i.nested_key): json.loads(i.value_json) for i in r.history.item})
        self.summary: dict[str, object] = {}
        for r, k in zip(self.records, kinds):
            if k == "summary":
                self.summary.update({i.key or "/".join(i.nested_key): json.loads(i.value_json)
                                     for i in r.summary.update})
        self.artifacts = [r.artifact for r, k in zip(self.records, kinds) if k == "artifact"]

    def table(self, name: str) -> pd.DataFrame:
        """A logged wandb.Table: the history names its file under files/."""
        meta = self.history[f"tables/{name}/path"]
        data = json.loads((self.dir / "files" / str(meta)).read_text())
        return pd.DataFrame(data["data"], columns=data["columns"])


def wandb_runs(root: Path) -> list[WandbRun]:
    return [WandbRun(d) for d in sorted((root / "wandb").glob("offline-run-*"))]


def run_record(folder: Path) -> dict:
    return json.loads((folder / "run.json").read_text())


# --------------------------------------------------------------------------- configuration
def test_the_parameter_names_a_wrong_field_and_maps_eve_blocks_unchanged():
    from evekit.runs.task.params import TaskParams

    base = {"task": "open_ended", "model_name": "m", "base_url": "http://127.0.0.1:9/v1"}
    for bad, message in [({"backend": "neptune"}, "tracking.backend='neptune'.*mlflow, wandb"),
                         ({"backend": "mlflow", "projet": "x"}, "tracking field 'projet'.*did you mean 'project'"),
                         ({"backend": "wandb", "log": {"plot": True}}, "tracking.log key 'plot'.*'plots'"),
                         ({"backend": "wandb", "log": {"plots": "yes"}}, "tracking.log.plots='yes'"),
                         ({"backend": "mlflow", "sample_count": -1}, "tracking.sample_count=-1"),
                         ({"backend": "mlflow", "uri": "http://user:pw@host:5000"}, "carries credentials"),
                         (["mlflow"], "parameter tracking=.*expected dict or str or None")]:
        with pytest.raises(ParameterError, match=message):
            TaskParams.from_dict({**base, "tracking": bad})
    assert TaskParams.from_dict(base).tracking_config is None  # default off
    assert TaskParams.from_dict({**base, "tracking": "mlflow"}).tracking_config.backend == "mlflow"
    eve = {"enabled": True, "project": "eve-win-rate", "entity": "esa", "run_name": "a-vs-b", "tags": ["eo", "v1"],
           "log": {"win_rates": True, "accuracy_rates": True, "judge_agreement": True, "position_bias": False,
                   "visualizations": False, "raw_results": True, "sample_rationales": True, "sample_count": 3}}
    cfg = TrackingConfig.from_eve_wandb(eve)
    assert (cfg.backend, cfg.project, cfg.entity, cfg.run_name, cfg.sample_count) == ("wandb", "eve-win-rate", "esa",
                                                                                     "a-vs-b", 3)
    assert cfg.notes is None and TrackingConfig.from_eve_wandb({**eve, "notes": "first try"}).notes == "first try"
    assert TrackingConfig.from_param(TrackingConfig.from_eve_wandb({**eve, "notes": "n"}).public()).notes == "n"
    with pytest.raises(ParameterError, match="tracking.notes=3"):
        TrackingConfig.from_eve_wandb({**eve, "notes": 3})
    assert not cfg.logs("plots") and not cfg.logs("position_bias") and cfg.logs("samples") and cfg.logs("win_rates")
    assert TrackingConfig.from_eve_wandb({**eve, "enabled": False}) is None
    with pytest.raises(ParameterError, match="wandb field 'projects'"):
        TrackingConfig.from_eve_wandb({"enabled": True, "projects": "x"})
    # The public record carries the configuration (results.json's params)
    record = TaskParams.from_dict({**base, "tracking": {"backend": "mlflow", "tags": {"team": "eo"}}}).as_dict()
    assert record["tracking"]["backend"] == "mlflow" and record["tracking"]["tags"] == {"team": "eo"}


def test_a_run_name_template_is_filled_per_run_as_eve_names_comparisons():
    from evekit.tracking import Tracked, run_label

    tracked = Tracked(folder=Path("out/t/win_rate/a_vs_b"), label="t/win_rate/a_vs_b",
                      tags={"evekit.task": "open_ended", "evekit.model_a": "eve_v0.5", "evekit.model_b": "mistral-small"})
    label = lambda name: run_label(TrackingConfig.from_param({"backend": "wandb", "run_name": name}), tracked)  # noqa: E731
    assert label("{model_a}_vs_{model_b}") == "eve_v0.5_vs_mistral-small"
    assert label("{task}: {model_a} {model}") == "open_ended: eve_v0.5 {model}"  # no value: as written
    assert label("fixed") == "fixed" and run_label(TrackingConfig.from_param("wandb"), tracked) == "t/win_rate/a_vs_b"


def test_samples_table_puts_eve_columns_first_then_scores_votes_rationales_and_failures_last():
    df = pd.DataFrame(columns=["acc", "filtered_resps", "doc.Question", "failed", "target", "doc_id", "doc.Topic"])
    assert list(samples_table(df).columns) == ["doc_id", "doc.Topic", "doc.Question", "target", "filtered_resps",
                                               "acc", "failed"]
    # A judged run's samples.csv as score_samples and the judges write it (numbers where they are numbers)
    written = ["doc_id", "doc.Topic", "doc.Question", "target", "filtered_resps", "response", "reasoning", "parsed",
               "unparsed", "unparsed_reason", "failed", "error", "finish_reason", "completion_tokens", "truncated",
               "bleu", "rougeL", "judge_j1", "judge_j1_reasoning", "judge_j1_raw", "judge_j1_error",
               "judge_j1_method", "judge_j1_flag", "judge_voting", "llm_as_judge_avg", "judge_agreement",
               "judge_n_votes", "judge_failed"]
    numeric = {"doc_id", "completion_tokens", "bleu", "rougeL", "judge_j1", "judge_voting", "llm_as_judge_avg",
               "judge_agreement", "judge_n_votes"}
    df = pd.DataFrame({c: [1.0] if c in numeric else [True] if c in ("unparsed", "truncated", "failed",
                                                                    "judge_failed") else ["x"] for c in written})
    assert list(samples_table(df).columns) == [
        "doc_id", "doc.Topic", "doc.Question", "target", "filtered_resps",  # EVE's
        "bleu", "rougeL", "llm_as_judge_avg",  # scores
        "judge_j1", "judge_voting", "judge_agreement", "judge_n_votes",  # votes
        "judge_j1_reasoning",  # rationales
        "response", "reasoning", "parsed", "unparsed", "unparsed_reason", "finish_reason", "completion_tokens",
        "truncated", "judge_j1_raw", "judge_j1_method", "judge_j1_flag",
        "failed", "error", "judge_j1_error", "judge_failed"]  # failures last


def test_samples_carry_the_datasets_topic_as_doc_topic_second(tmp_path):
    from evekit.tasks import load_items, score_samples
    from evekit.types import GenerationResult

    data = tmp_path / "mc.jsonl"  # `topic` in lower case (columns match case-insensitively); one row without
    data.write_text("".join(json.dumps({"Question": f"q{i}?", "Choices": ["a", "b"], "Answer": "A",
                                        **({"topic": f" sar {i} "} if i else {})}) + "\n" for i in range(3)))
    items = load_items("mcqa_single_answer", str(data))
    df = score_samples("mcqa_single_answer", items, [GenerationResult(text="A")] * 3)
    assert list(df.columns[:5]) == list(EVE_SAMPLE_COLUMNS)
    assert df["doc.Topic"].tolist() == ["", "sar 1", "sar 2"]
    plain = tmp_path / "plain.jsonl"  # no Topic column: no doc.Topic column either
    plain.write_text(json.dumps({"Question": "q?", "Choices": ["a", "b"], "Answer": "A"}) + "\n")
    df = score_samples("mcqa_single_answer", load_items("mcqa_single_answer", str(plain)), [GenerationResult(text="A")])
    assert "doc.Topic" not in df.columns and list(df.columns[:2]) == ["doc_id", "doc.Question"]


# --------------------------------------------------------------------------- a task run
def test_a_task_run_in_mlflow_params_metrics_with_intervals_samples_and_artifacts(tmp_path, capsys):
    with StubServer(verdicts=True, api_key=SENTINEL) as stub:
        out = task_run(tmp_path, stub, {"backend": "mlflow", "tags": ["eo"]})
    results = json.loads((out / "results.json").read_text())
    (run,) = mlflow_runs(tmp_path / "out")
    client = mlflow_client(tmp_path / "out")
    assert run.info.status == "FINISHED" and run.info.run_name == "t/stub-model/open_ended"
    p = run.data.params
    assert p["task"] == "open_ended" and p["model_name"] == MODEL and p["api_key_env"] == "EVEKIT_TEST_KEY"
    assert json.loads(p["judges"])[0]["name"] == "j1" and p["tracking.backend"] == "mlflow"
    m = run.data.metrics
    for name, metric in results["metrics"].items():
        if metric["value"] is None:
            continue
        assert m[f"open_ended/{name}"] == pytest.approx(metric["value"])
        for key in ("ci_low", "ci_high", "n"):
            if metric.get(key) is not None:
                assert m[f"open_ended/{name}_{key}"] == pytest.approx(metric[key]), (name, key)
    assert "open_ended/llm_as_judge_ci_low" in m and m["open_ended/llm_as_judge_n"] >= 1
    assert m["open_ended/n"] == 6 and m["open_ended/n_failed"] == results["n_failed"]
    assert m["open_ended/usage/requests"] == results["usage"]["requests"]
    tags = run.data.tags
    assert tags["evekit.kind"] == "task" and tags["evekit.model"] == MODEL and "eo" in tags
    samples = mlflow_table(client, run.info.run_id, "samples")
    written = pd.read_csv(out / "samples.csv")
    # samples.csv carries the dataset's Topic as EVE's doc.Topic, second as in EVE's samples
    assert list(written.columns[:5]) == list(EVE_SAMPLE_COLUMNS)
    assert written["doc.Topic"].tolist() == [f"t{i % 2}" for i in range(6)]
    assert list(samples.columns[:5]) == list(EVE_SAMPLE_COLUMNS)
    # The scores (cosine when the embeddings extra is installed), then the votes
    scores = [c for c in written.columns if c in ("bleu", "rougeL", "cosine", "llm_as_judge_avg")]
    assert list(samples.columns[5:5 + len(scores) + 1]) == [*scores, "judge_j1"]
    assert list(samples.columns[-4:]) == ["failed", "error", "judge_j1_error", "judge_failed"]
    assert samples["doc.Topic"].tolist() == written["doc.Topic"].tolist()
    assert len(samples) == len(written) == 6
    assert samples["filtered_resps"].tolist() == written["filtered_resps"].fillna("").astype(str).tolist()
    artifacts = mlflow_artifacts(client, run.info.run_id)
    pngs = sorted(p.name for p in out.glob("*.png"))
    assert pngs and [a for a in artifacts if a.startswith("plots/")] == [f"plots/{n}" for n in pngs]
    assert {"outputs/samples.csv", "outputs/results.json", "outputs/run.json"} <= set(artifacts)
    status = run_record(out)["tracking"]
    assert status["status"] == "logged" and status["run_id"] == run.info.run_id
    assert status["ui"] == f"mlflow ui --backend-store-uri {default_mlflow_uri(tmp_path / 'out')}"
    assert f"Tracked in MLflow: run {run.info.run_id}" in capsys.readouterr().out


def test_a_task_run_in_wandb_offline_history_summary_table_images(tmp_path):
    with StubServer(verdicts=True, api_key=SENTINEL) as stub:
        out = task_run(tmp_path, stub, {"backend": "wandb", "project": "eo-evals", "tags": ["eo"]})
    results = json.loads((out / "results.json").read_text())
    (run,) = wandb_runs(tmp_path / "out")
    assert run.run.display_name == "t/stub-model/open_ended" and run.run.project == "eo-evals"
    assert "eo" in run.run.tags and "evekit.kind:task" in run.run.tags
    assert run.config["task"] == "open_ended" and run.config["judges"][0]["api_key_env"] == "EVEKIT_TEST_KEY"
    value = results["metrics"]["llm_as_judge"]
    for source in (run.history, run.summary):
        assert source["open_ended/llm_as_judge"] == pytest.approx(value["value"])
        assert source["open_ended/llm_as_judge_ci_low"] == pytest.approx(value["ci_low"])
        assert source["open_ended/llm_as_judge_ci_high"] == pytest.approx(value["ci_high"])
        assert source["open_ended/llm_as_judge_n"] == value["n"]
    samples = run.table("samples")
    assert list(samples.columns[:5]) == list(EVE_SAMPLE_COLUMNS) and len(samples) == 6
    pngs = sorted(out.glob("*.png"))
    assert pngs
    for png in pngs:
        image = run.history[f"plots/{png.stem}/path"]
        assert run.history[f"plots/{png.stem}/_type"] == "image-file"
        assert (run.dir / "files" / str(image)).read_bytes() == png.read_bytes()
    (art,) = [a for a in run.artifacts if a.type == "evekit-run"]
    assert {c.path for c in art.manifest.contents} >= {"samples.csv", "results.json", "run.json"}
    status = run_record(out)["tracking"]
    assert status["status"] == "logged" and status["run_id"] == run.run.run_id and status["mode"] == "offline"
    assert status["sync"].startswith("wandb sync ") and status["sync"].endswith(run.dir.name)


# --------------------------------------------------------------------------- win rate and ranking
def test_a_win_rate_and_a_ranking_in_both_trackers(tmp_path):
    with StubServer() as stub:
        (wr,) = win_rate_run(tmp_path, stub, {"backend": "mlflow", "sample_count": 3, "notes": NOTES})
        rk = ranking_run(tmp_path, stub, {"backend": "mlflow"})
        # W&B through EVE's own wandb block, its `notes` included
        eve_block = {"enabled": True, "run_name": "{model_a}_vs_{model_b}", "tags": ["win-rate"], "notes": NOTES,
                     "log": {"visualizations": True, "raw_results": True, "sample_rationales": True, "sample_count": 3}}
        (wr_w,) = win_rate_run(tmp_path / "w", stub, TrackingConfig.from_eve_wandb(eve_block).public())
        rk_w = ranking_run(tmp_path / "w", stub, {"backend": "wandb"})
    client = mlflow_client(tmp_path / "out")
    runs = {r.data.tags["evekit.kind"]: r for r in mlflow_runs(tmp_path / "out")}
    assert set(runs) == {"win_rate", "ranking"}
    # Win rate: EVE's numbers under EVE's names, evekit's under evekit/, the rates' intervals, the tables
    record = json.loads((wr / "metrics.json").read_text())
    metrics = record["metrics"]
    m = runs["win_rate"].data.metrics
    assert runs["win_rate"].data.tags["mlflow.note.content"] == NOTES  # the run's description in MLflow's UI
    for name, value in record["eve_definitions"].items():  # every EVE name logged carries EVE's definition
        if value is not None:
            assert m[name] == pytest.approx(value), name
    results = pd.read_csv(wr / "results.csv")
    s1 = results[results.judge == "s1"]
    assert m["win_rate/s1/strong"] == pytest.approx((s1.winner_model == "model_a").sum() / len(s1))
    assert m["judge_agreement/unanimous_rate"] == pytest.approx(metrics["judge_agreement/unanimous_rate"])
    summary = pd.read_csv(wr / "summary.csv").set_index("judge")
    assert m["evekit/average/judge_agreement"] == pytest.approx(summary.at["average", "judge_agreement"])
    assert m["evekit/majority/strong_win_rate"] == pytest.approx(summary.at["majority", "win_rate_a"])
    assert not [k for k in m if k.startswith("majority/") or k == "aggregate/judge_agreement"]
    assert m["summary/majority/win_rate_a"] == pytest.approx(summary.at["majority", "win_rate_a"])
    assert m["summary/majority/win_rate_a_ci_low"] == pytest.approx(summary.at["majority", "win_rate_a_ci_low"])
    assert m["summary/majority/win_rate_a_ci_high"] == pytest.approx(summary.at["majority", "win_rate_a_ci_high"])
    assert m["summary/majority/position_bias_n"] == summary.at["majority", "n"]
    run_id = runs["win_rate"].info.run_id
    assert len(mlflow_table(client, run_id, "win_rates")) == len(summary)
    assert len(mlflow_table(client, run_id, "raw_results")) == len(pd.read_csv(wr / "results.csv"))
    rationales = mlflow_table(client, run_id, "sample_rationales")
    assert len(rationales) == 3 and rationales["rationale"].str.len().gt(0).all()
    # Ranking: each model's pooled rating with its interval, the tables
    ratings = pd.read_csv(rk / "ratings.csv")
    pooled = ratings[ratings["judge"] == "pooled"].set_index("model")
    m = runs["ranking"].data.metrics
    for model, row in pooled.iterrows():
        assert m[f"open_ended/rating/{model}"] == pytest.approx(row["rating"])
        assert m[f"open_ended/rating/{model}_ci_low"] == pytest.approx(row["ci_low"])
        assert m[f"open_ended/rating/{model}_n"] == row["n_battles"]
    assert m["open_ended/rating/strong"] > m["open_ended/rating/weak"]
    run_id = runs["ranking"].info.run_id
    assert len(mlflow_table(client, run_id, "ratings")) == len(ratings)
    assert len(mlflow_table(client, run_id, "battles")) == len(pd.read_csv(rk / "battles.csv"))
    assert {"plots/ratings_forest.png", "plots/win_probability.png"} <= set(mlflow_artifacts(client, run_id))
    # The same in W&B's offline files
    wruns = {next(t.split(":", 1)[1] for t in r.run.tags if t.startswith("evekit.kind:")): r
             for r in wandb_runs(tmp_path / "w" / "out")}
    assert set(wruns) == {"win_rate", "ranking"}
    w = wruns["win_rate"]
    assert w.run.notes == NOTES and w.run.display_name == "strong_vs_middle"  # EVE's notes, its run_name filled
    eve_w = json.loads((wr_w / "metrics.json").read_text())["eve_definitions"]
    assert w.summary["win_rate/s1/strong"] == pytest.approx(eve_w["win_rate/s1/strong"])
    assert w.summary["aggregate/win_rate_difference"] == pytest.approx(eve_w["aggregate/win_rate_difference"])
    assert len(w.table("sample_rationales")) == 3 and len(w.table("win_rates")) == len(summary)
    assert "plots/comparison/path" in w.history and "plots/position_bias/path" in w.history
    r = wruns["ranking"]
    pooled_w = pd.read_csv(rk_w / "ratings.csv").query("judge == 'pooled'").set_index("model")
    assert r.summary["open_ended/rating/strong_ci_high"] == pytest.approx(pooled_w.at["strong", "ci_high"])
    assert len(r.table("battles")) == len(pd.read_csv(rk_w / "battles.csv"))


def test_a_judge_validation_and_the_summary_in_mlflow(tmp_path):
    from evekit.runs.judge_validation.run import ValidationRun
    from evekit.runs.summary.run import SummaryRun

    with StubServer(verdicts=True, api_key=SENTINEL) as stub:
        task_run(tmp_path, stub, None)
        run = ValidationRun.from_params(judge_kind="fact_check", limit=8, judges=[
            {"name": "v1", "model": "stub-v1", "base_url": stub.base_url, "api_key_env": "EVEKIT_TEST_KEY"}],
            cache_dir=str(tmp_path / "cache"), output_dir=str(tmp_path / "out"), run_name="t", tracking="mlflow")
        run.load()
        run.judge()
        run.table()
        jv = run.save()
    summary = SummaryRun.from_params(output_dir=str(tmp_path / "out"), run_name="t", tracking="mlflow")
    summary.found()
    summary.board_table()
    sm = summary.save()
    runs = {r.data.tags["evekit.kind"]: r for r in mlflow_runs(tmp_path / "out")}
    assert set(runs) == {"judge_validation", "summary"}
    table = pd.read_csv(jv / "judge_validation.csv").set_index("judge")
    m = runs["judge_validation"].data.metrics
    assert m["fact_check/v1/accuracy"] == pytest.approx(table.at["v1", "accuracy"])
    assert m["fact_check/v1/accuracy_ci_low"] == pytest.approx(table.at["v1", "accuracy_ci_low"])
    assert m["fact_check/v1/accuracy_n"] == table.at["v1", "n"]
    client = mlflow_client(tmp_path / "out")
    assert len(mlflow_table(client, runs["judge_validation"].info.run_id, "judge_validation")) == len(table)
    board = pd.read_csv(sm / "leaderboard.csv")
    row = board.iloc[0]
    m = runs["summary"].data.metrics
    assert row["model"] == "stub-model · t"  # the tracker's key: letters, digits, _-./ and spaces, the rest _
    assert m[safe_key(f"{row['task']}/{row['model']}/{row['metric']}")] == pytest.approx(row["value"])
    assert m["open_ended/stub-model _ t/llm_as_judge_ci_high"] == pytest.approx(row["ci_high"])
    assert len(mlflow_table(client, runs["summary"].info.run_id, "leaderboard")) == len(board)
    assert run_record(sm)["tracking"]["status"] == run_record(jv)["tracking"]["status"] == "logged"


# --------------------------------------------------------------------------- secrets
def test_no_secret_reaches_either_tracker(tmp_path):
    with StubServer(verdicts=True, api_key=SENTINEL) as stub:
        task_run(tmp_path / "m", stub, "mlflow")
        task_run(tmp_path / "w", stub, "wandb")
        assert stub.stats()["rejected"].get("401", 0) == 0  # the key was really sent, and accepted
    written = [p for root in (tmp_path / "m" / "out", tmp_path / "w" / "out", tmp_path / "wandb-home")
               for p in root.rglob("*") if p.is_file()]
    assert any(p.suffix == ".db" for p in written) and any(p.suffix == ".wandb" for p in written)
    assert len(written) > 20
    for path in written:
        data = path.read_bytes()
        for secret in (SENTINEL, OTHER_SECRET):
            assert secret.encode() not in data, f"{secret} in {path}"


# --------------------------------------------------------------------------- a tracker that fails
def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _comparable(results: dict) -> dict:
    out = {k: v for k, v in results.items() if k not in ("timestamp", "usage")}
    out["params"] = {k: v for k, v in results["params"].items() if k != "tracking"}
    return out


def test_an_unreachable_server_leaves_the_outputs_and_the_time_as_they_were(tmp_path, capsys):
    port = _closed_port()
    with StubServer(verdicts=True, api_key=SENTINEL) as stub:
        task_run(tmp_path, stub, None)  # fills the cache: the runs below replay it
        t0 = time.monotonic()
        plain = task_run(tmp_path, stub, None)
        untracked = time.monotonic() - t0
        saved = {p.name: p.read_bytes() for p in plain.iterdir() if p.suffix in (".csv", ".png", ".jsonl")}
        results = json.loads((plain / "results.json").read_text())
        t0 = time.monotonic()
        tracked = task_run(tmp_path, stub, {"backend": "mlflow", "uri": f"http://127.0.0.1:{port}"})
        failing = time.monotonic() - t0
    assert tracked == plain
    after = {p.name: p.read_bytes() for p in tracked.iterdir() if p.suffix in (".csv", ".png", ".jsonl")}
    assert after.keys() == saved.keys()
    for name in saved:
        if name == "results.eee.jsonl":
            continue  # it carries the time it was written; its numbers are results.json's, compared below
        assert after[name] == saved[name], name
    assert _comparable(json.loads((tracked / "results.json").read_text())) == _comparable(results)
    status = run_record(tracked)["tracking"]
    assert status["backend"] == "mlflow" and status["status"] == "failed"
    assert f"127.0.0.1:{port} cannot be reached" in status["error"]
    err = capsys.readouterr().err
    assert err.count("tracking to mlflow failed") == 1 and "outputs are unaffected" in err
    print(f"untracked {untracked:.2f} s, unreachable MLflow {failing:.2f} s")
    assert failing < untracked + 3.0, (untracked, failing)


def test_credentials_in_mlflow_tracking_uri_are_never_recorded(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"http://evekit:{SENTINEL}@127.0.0.1:{_closed_port()}")
    with StubServer(verdicts=True, api_key=SENTINEL) as stub:
        out = task_run(tmp_path, stub, "mlflow")
    status = run_record(out)["tracking"]
    assert status["status"] == "failed" and "cannot be reached" in status["error"]
    assert SENTINEL not in capsys.readouterr().err
    for path in (tmp_path / "out").rglob("*"):
        assert not path.is_file() or SENTINEL.encode() not in path.read_bytes(), path


def test_a_missing_extra_is_a_recorded_failure_naming_the_install_command(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "wandb", None)  # `import wandb` raises ImportError, as without the extra
    with StubServer(verdicts=True, api_key=SENTINEL) as stub:
        out = task_run(tmp_path, stub, "wandb")
    status = run_record(out)["tracking"]
    assert status["status"] == "failed" and "pip install 'evekit[tracking]'" in status["error"]
    assert (out / "results.json").is_file() and "failed" in describe(status)


# --------------------------------------------------------------------------- replays
def test_a_replay_from_the_cache_is_not_logged_again_unless_asked(tmp_path):
    with StubServer(verdicts=True, api_key=SENTINEL) as stub:
        first = run_record(task_run(tmp_path, stub, "mlflow"))["tracking"]
        again = run_record(task_run(tmp_path, stub, "mlflow"))["tracking"]
        assert stub.stats()["total"] > 0
        assert len(mlflow_runs(tmp_path / "out")) == 1
        assert again["status"] == "replay" and again["run_id"] == first["run_id"]
        forced = run_record(task_run(tmp_path, stub, {"backend": "mlflow", "log_replays": True}))["tracking"]
        wandb_first = run_record(task_run(tmp_path, stub, "wandb"))["tracking"]
        wandb_again = run_record(task_run(tmp_path, stub, "wandb"))["tracking"]
    assert forced["status"] == "logged" and forced["run_id"] != first["run_id"]
    assert len(mlflow_runs(tmp_path / "out")) == 2
    assert wandb_again["status"] == "replay" and wandb_again["run_id"] == wandb_first["run_id"]
    assert len(wandb_runs(tmp_path / "out")) == 1


# --------------------------------------------------------------------------- evekit run
def test_evekit_run_logs_after_the_report_and_groups_the_batch(tmp_path, monkeypatch):
    import yaml

    from evekit.batch.execute import run_batch

    monkeypatch.setenv("EVEKIT_BATCH", "batch-42")
    with StubServer(verdicts=True, api_key=SENTINEL) as stub:
        files = []
        for variant, run_name, extra in (("tracked", "b", {}), ("wandb", "b2", {"tracking": {"backend": "wandb"}})):
            params = tmp_path / f"open_ended.{variant}.yaml"
            params.write_text(yaml.safe_dump({
                "model_name": MODEL, "base_url": stub.base_url, "api_key_env": "EVEKIT_TEST_KEY",
                "dataset": str(_open_ended_file(tmp_path)), "num_fewshot": 0, "limit": 4,
                "cache_dir": str(tmp_path / "cache"), "output_dir": str(tmp_path / "out"), "run_name": run_name,
                **extra}))
            files.append(str(params))
        # --track applies to the file that sets no `tracking`; the other keeps its own (W&B)
        assert run_batch(files, track="mlflow") == 0
    out = tmp_path / "out" / "b" / MODEL / "open_ended"
    (run,) = mlflow_runs(tmp_path / "out")
    client = mlflow_client(tmp_path / "out")
    assert run.data.tags["evekit.batch"] == "batch-42" and run.info.status == "FINISHED"
    assert "report.html" in mlflow_artifacts(client, run.info.run_id)
    assert run.data.params["tracking.backend"] == "mlflow"  # --track reached the notebook's record too
    status = run_record(out)["tracking"]
    assert status["status"] == "logged" and status["run_id"] == run.info.run_id and status["group"] == "batch-42"
    report = (out / "report.html").read_text()
    assert f"Tracked in MLflow: run {run.info.run_id}" in report
    index = (tmp_path / "out" / "b" / "index.html").read_text()
    assert "mlflow run" in index and run.info.run_id in index
    # The W&B run of the same batch: its group, and report.html logged as HTML
    (w,) = wandb_runs(tmp_path / "out")
    assert w.run.run_group == "batch-42" and w.history["report/_type"] == "html-file"
    html_file = w.dir / "files" / str(w.history["report/path"])
    assert html_file.read_text() == (tmp_path / "out" / "b2" / MODEL / "open_ended" / "report.html").read_text()
    w_status = run_record(tmp_path / "out" / "b2" / MODEL / "open_ended")["tracking"]
    assert w_status["backend"] == "wandb" and w_status["status"] == "logged" and w_status["run_id"] == w.run.run_id
    assert "Tracked in W&amp;B (offline)" in (tmp_path / "out" / "b2" / MODEL / "open_ended" / "report.html").read_text()


# --------------------------------------------------------------------------- offline first
def _no_secret_in(*roots: Path) -> None:
    for root in roots:
        for path in root.rglob("*"):
            if path.is_file():
                data = path.read_bytes()
                for secret in (SENTINEL, OTHER_SECRET):
                    assert secret.encode() not in data, f"{secret} in {path}"


def test_an_online_wandb_that_fails_is_logged_offline_for_a_later_sync(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("WANDB_MODE", "online")
    monkeypatch.setenv("WANDB_API_KEY", SENTINEL)  # credentials it cannot use: never written anywhere
    port = _closed_port()
    monkeypatch.setenv("WANDB_BASE_URL", f"http://127.0.0.1:{port}")  # no network: nothing listens there
    with StubServer(verdicts=True, api_key=SENTINEL) as stub:
        t0 = time.monotonic()
        out = task_run(tmp_path / "down", stub, "wandb")
        seconds = time.monotonic() - t0
        # A server that answers, but credentials it cannot use (the sentinel is no W&B key): wandb.init
        # refuses them; offline again
        monkeypatch.setenv("WANDB_BASE_URL", stub.base_url.rsplit("/v1", 1)[0])
        no_key = task_run(tmp_path / "nokey", stub, "wandb")
    status = run_record(out)["tracking"]
    assert status["status"] == "logged" and status["mode"] == "offline" and status["url"] is None
    assert "online W&B failed" in status["fallback"] and f"127.0.0.1:{port} cannot be reached" in status["fallback"]
    (run,) = wandb_runs(tmp_path / "down" / "out")  # the offline run's files, kept for `wandb sync`
    assert status["run_id"] == run.run.run_id and status["sync"] == f"wandb sync {run.dir}"
    results = json.loads((out / "results.json").read_text())
    assert run.summary["open_ended/llm_as_judge"] == pytest.approx(results["metrics"]["llm_as_judge"]["value"])
    line = describe(status)
    assert line.startswith(f"Tracked in W&B (offline): run {run.run.run_id} · wandb sync ")
    assert "online W&B failed" in line and "later `wandb sync`" in line
    assert "online W&B failed" in capsys.readouterr().err
    print(f"task run with an unreachable online W&B: {seconds:.1f} s")
    assert seconds < 25, seconds  # the refused connection is known at once: no wandb init_timeout (30 s) wait
    status = run_record(no_key)["tracking"]
    assert status["status"] == "logged" and status["mode"] == "offline" and "API key" in status["fallback"]
    assert len(wandb_runs(tmp_path / "nokey" / "out")) == 1
    _no_secret_in(tmp_path / "down" / "out", tmp_path / "nokey" / "out", tmp_path / "wandb-home")


def test_evekit_track_logs_an_output_folder_after_the_server_was_down(tmp_path, monkeypatch, capsys):
    from evekit import cli
    from evekit.paths import display_path

    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"http://127.0.0.1:{_closed_port()}")  # the server is down
    with StubServer(verdicts=True, api_key=SENTINEL) as stub:
        out = task_run(tmp_path, stub, "mlflow")
        plain = task_run(tmp_path / "plain", stub, None)
    failed = run_record(out)["tracking"]
    assert failed["status"] == "failed" and failed["retry"] == f"evekit track {display_path(out)}"
    assert describe(failed).endswith(f"log it later: evekit track {display_path(out)}")
    assert "`evekit track <output folder>` logs the runs later" in capsys.readouterr().err
    monkeypatch.delenv("MLFLOW_TRACKING_URI")  # ... and now the run goes to the local store
    assert cli.main(["track", str(out)]) == 0
    printed = capsys.readouterr().out
    (run,) = mlflow_runs(tmp_path / "out")
    assert run.info.status == "FINISHED" and run.info.run_name == "t/stub-model/open_ended"
    assert f"Tracked in MLflow: run {run.info.run_id}" in printed
    results = json.loads((out / "results.json").read_text())
    assert run.data.metrics["open_ended/llm_as_judge"] == pytest.approx(results["metrics"]["llm_as_judge"]["value"])
    assert run.data.metrics["open_ended/llm_as_judge_ci_low"] == pytest.approx(
        results["metrics"]["llm_as_judge"]["ci_low"])
    client = mlflow_client(tmp_path / "out")
    samples = mlflow_table(client, run.info.run_id, "samples")
    assert len(samples) == 6 and list(samples.columns[:5]) == list(EVE_SAMPLE_COLUMNS)
    assert {"outputs/samples.csv", "plots/" + sorted(out.glob("*.png"))[0].name} <= set(
        mlflow_artifacts(client, run.info.run_id))
    status = run_record(out)["tracking"]
    assert status["status"] == "logged" and status["run_id"] == run.info.run_id
    # Again, on the folder above it: logged before, so not again; W&B when named
    assert cli.main(["track", str(tmp_path / "out")]) == 0
    assert "a replay, logged before" in capsys.readouterr().out and len(mlflow_runs(tmp_path / "out")) == 1
    assert cli.main(["track", str(out), "--tracking", "wandb", "--project", "later"]) == 0
    (w,) = wandb_runs(tmp_path / "out")
    assert w.run.project == "later" and w.summary["open_ended/llm_as_judge"] == pytest.approx(
        results["metrics"]["llm_as_judge"]["value"])
    # A run made without `tracking` needs --tracking; a folder without runs is an error naming it
    capsys.readouterr()
    assert cli.main(["track", str(plain)]) == 2
    assert "had no `tracking` parameter" in capsys.readouterr().err
    assert cli.main(["track", str(tmp_path / "cache")]) == 2
    assert "no run.json in it or below it" in capsys.readouterr().err
    assert cli.main(["track", str(plain), "--tracking", "mlflow"]) == 0
    assert len(mlflow_runs(tmp_path / "plain" / "out")) == 1


# --------------------------------------------------------------------------- evekit eval
def test_evekit_eval_track_logs_each_run(tmp_path, capsys):
    from evekit import cli

    with StubServer(verdicts=True, api_key=SENTINEL) as stub:
        code = cli.main(["eval", "--model", MODEL, "--base-url", stub.base_url, "--api-key-env", "EVEKIT_TEST_KEY",
                         "--task", "open_ended", "--dataset", str(_open_ended_file(tmp_path)), "--num-fewshot", "0",
                         "--no-notebook", "--output-dir", str(tmp_path / "out"), "--run-name", "e",
                         "--set", f"cache_dir={tmp_path / 'cache'}", "--track", "mlflow"])
    assert code == 0
    out = tmp_path / "out" / "e" / MODEL / "open_ended"
    (run,) = mlflow_runs(tmp_path / "out")
    assert run.data.params["tracking.backend"] == "mlflow"
    results = json.loads((out / "results.json").read_text())
    assert run.data.metrics["open_ended/bleu"] == pytest.approx(results["metrics"]["bleu"]["value"])
    assert run_record(out)["tracking"]["run_id"] == run.info.run_id
    assert cli.main(["eval", "--model", MODEL, "--base-url", "http://127.0.0.1:9/v1", "--task", "open_ended",
                     "--track", "mlflow", "--set", "tracking=wandb"]) == 2
    assert "--track and --set tracking=... both name the tracker" in capsys.readouterr().err
