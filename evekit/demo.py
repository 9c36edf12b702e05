"""The embedded demo model's caveat: every report that shows it, or a score it judged, says so.

Its home is here, not beside the llama.cpp process (`evekit.server`): reports need the wording,
not the server.
"""
from __future__ import annotations

__all__ = ["DEMO_MODEL_NOTE", "demo_judge_note", "demo_judges", "is_demo_model"]

DEMO_MODEL_NOTE = (
    "The embedded demo model (SmolLM2-135M-Instruct, 4-bit) is tiny: its scores show that the "
    "pipeline works, they are not a finding about any model."
)


def demo_judge_note(names: "list[str] | tuple[str, ...]") -> str:
    """The caveat of every judged report whose judges (by name) include the embedded demo model."""
    return (f"Judge(s) {', '.join(names)}: the embedded demo model (SmolLM2-135M-Instruct, 4-bit) judging. A "
            "135M model cannot fact-check EO answers; its verdicts show that the judging pipeline works and "
            "are no judgement: every judged score it gives (open_ended, open_ended_w_context, refusal, the "
            "win rate) is no evidence about the model judged. notebooks/judge_validation.ipynb measures it "
            "against expert labels.")


def demo_judges(judges: "list | tuple") -> list[str]:
    """Names of the judges (JudgeSpecs or dicts with name and model) that are the demo model."""
    out = []
    for j in judges:
        model = j.get("model") if isinstance(j, dict) else getattr(j, "model", None)
        name = j.get("name") if isinstance(j, dict) else getattr(j, "name", None)
        if is_demo_model(model):
            out.append(str(name or model))
    return out


def is_demo_model(model_name: str | None) -> bool:
    """The tiny embedded model (any name containing "smollm2"): its reports carry `DEMO_MODEL_NOTE`."""
    return "smollm2" in str(model_name or "").lower()
