"""plots.show and plots.save_figure: a figure is drawn once for the notebook and the file, in a real
IPython kernel (nbclient), and drawn again when it changed after it was shown."""
from __future__ import annotations

import base64
import io
from pathlib import Path

import matplotlib

matplotlib.use("agg")

import matplotlib.pyplot as plt  # noqa: E402
import nbformat  # noqa: E402
from nbclient import NotebookClient  # noqa: E402
from nbformat.v4 import new_code_cell, new_notebook  # noqa: E402
from PIL import Image  # noqa: E402

from evekit import plots  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent

DRAW = """
import matplotlib.pyplot as plt
from evekit import plots
fig, ax = plt.subplots(figsize=(5, 3), layout="constrained")
ax.bar(["a", "b"], [0.4, 0.7])
ax.set_title("pass rate")
"""


def _run(tmp_path: Path, *sources: str) -> list[list[dict]]:
    nb = new_notebook(cells=[new_code_cell(s) for s in sources])
    NotebookClient(nb, kernel_name="python3", timeout=120, resources={"metadata": {"path": str(ROOT)}}).execute()
    return [[dict(o) for o in cell.outputs] for cell in nb.cells]


def _png_size(data: bytes) -> tuple[int, int]:
    return Image.open(io.BytesIO(data)).size


def test_a_shown_figure_is_drawn_once_and_saved_as_shown_until_it_changes(tmp_path):
    shown, fresh, changed = tmp_path / "shown.png", tmp_path / "fresh.png", tmp_path / "changed.png"
    cells = _run(tmp_path, DRAW + "plots.show(fig);",
                 f"plots.save_figure(fig, {str(shown)!r})\n"
                 f"fig.savefig({str(fresh)!r}, dpi=plots.SAVE_DPI, bbox_inches='tight')\n"
                 "print('open figures', len(plt.get_fignums()))\n"
                 "fig.axes[0].set_title('pass rate, judged twice')\n"
                 f"plots.save_figure(fig, {str(changed)!r})")
    images = [o for o in cells[0] if "image/png" in o.get("data", {})]
    assert len(images) == 1                       # not a second time by the inline backend at the cell's end
    png = base64.b64decode(images[0]["data"]["image/png"])
    assert images[0]["data"]["text/plain"] == "<Figure size 500x300 with 1 Axes>"  # as the inline backend says
    assert png == shown.read_bytes() == fresh.read_bytes()  # the file is the image shown, as savefig draws it
    width, _ = _png_size(png)
    # Shown at the size the inline backend would give it (the figure's 100 dpi), drawn at SAVE_DPI.
    assert images[0]["metadata"]["image/png"]["width"] == round(width * 100 / plots.SAVE_DPI)
    assert "open figures 0" in "".join(o.get("text", "") for o in cells[1])
    assert changed.read_bytes() != png            # changed after it was shown: drawn again
    assert _png_size(changed.read_bytes())[1] == _png_size(png)[1]


def test_with_another_inline_format_the_figure_is_shown_once_in_it(tmp_path):
    cells = _run(tmp_path, "from matplotlib_inline.backend_inline import set_matplotlib_formats\nset_matplotlib_formats('svg')",
                 DRAW + "plots.show(fig);")
    kinds = [sorted(o.get("data", {})) for o in cells[1]]
    assert kinds == [["image/svg+xml", "text/plain"]]


def test_outside_a_kernel_show_only_closes_and_save_figure_draws(tmp_path):
    fig, ax = plt.subplots(figsize=(4, 3))
    ax.plot([0, 1], [1, 0])
    assert plots.show(fig) is fig
    assert fig.number not in plt.get_fignums()
    path = plots.save_figure(fig, tmp_path / "deep" / "line.png")
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=plots.SAVE_DPI, bbox_inches="tight")
    assert path.read_bytes() == buffer.getvalue()
