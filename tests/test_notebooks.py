"""The notebooks run, offline, and show their pictures: each notebook in notebooks/ is executed
with nbclient (a Jupyter kernel of this environment) in a temporary folder with a temporary
workspace, and its outputs must hold the figures it promises - `image/png` for matplotlib
figures and Previews, `text/html` with `<img` for the search table with thumbnails.

What they print is checked too: the claims a reader takes away ("same values ... True" after the
two schedulers' runs; every saved output named with a title, never "(None)").

The committed notebooks carry no outputs (they are stripped: no outputs, execution_count null).

With NOTEBOOK_FIGURES=<folder> the run also writes each notebook's first figure
from the cell tagged "figure" to <folder>/notebook-<name>.png (docs/img holds the ones the docs
show: `NOTEBOOK_FIGURES=docs/img pytest tests/test_notebooks.py`).
"""

from __future__ import annotations

import base64
import os
import re
from pathlib import Path

import nbformat
import pytest

NOTEBOOKS = Path(__file__).parent.parent / "notebooks"
CELL_TIMEOUT_S = 300

# Per notebook: how many outputs of each kind its executed cells must show.
EXPECTED = {
    "discovery": {"image/png": 1, "html_img": 1},  # footprints map; results table with thumbnails
    "clouds": {"image/png": 2, "html_img": 0},  # ranking bar chart; clearest/cloudiest with mask
    "processing": {"image/png": 3, "html_img": 0},  # reprojected Preview; NDVI plot; composite
    "scale": {"image/png": 1, "html_img": 0},  # the series on the cluster vs on threads
    "fields": {"image/png": 2, "html_img": 0},  # fields coloured by NDVI; the per-field series
    "change": {"image/png": 2, "html_img": 0},  # before / after / change; dense area per day
}


# Per notebook: (pattern that must match the printed text, how many times), and what must not appear.
PRINTED = {
    "scale": [(r"^same values \(NaN on the same days\): True - \d+ day\(s\) without a usable pixel$", 1)],
    "processing": [(r"^\S+  \(.+\)$", 3), (r"^  file: \S+, [1-9]\d* derived_from links$", 3)],
    "clouds": [],
    "discovery": [],
    "fields": [
        (r"^fields: 6, solar days: 5, rows: 30$", 1),
        (r"^clearest day: 2024-06-19 \(100% of the fields' area clear\)$", 1),
        (r"^field-days without a clear pixel: [1-9]\d* \(mean missing on each: True\)$", 1),
        (
            r"^field-days under min_valid_fraction=0\.5: [1-9]\d* \(no mean on each: True; with min_valid_fraction=0: [1-9]\d* have one\)$",
            1,
        ),
        (r"^land cover of 6 fields on \d{4}-\d\d-\d\d, each row sums to 1: True$", 1),
        (r"^saved zonal-stats-\S+\.parquet: 30 rows, [1-9]\d* derived_from links$", 1),
        (r"^same values as the table: True$", 1),
    ],
}
PRINTED["change"] = [
    (r"^fields: 6, June scenes: 2, August scenes: 1$", 1),
    (r"^most loss: \w+, [1-9][\d.]* ha down by more than 0\.1 NDVI$", 1),
    (r"^change = August - June on every pixel: True$", 1),
    (r"^saved change-\S+\.tif: the change as a COG, [1-9]\d* derived_from links$", 1),
    (r"^field-days: 30, too cloudy to measure: [1-9]\d* \(a note on each: True\)$", 1),
]
NEVER_PRINTED = ["(None)", ": False", "nan"]


def printed(book) -> str:
    return "".join(
        o.get("text", "") for cell in book.cells for o in cell.get("outputs", []) if o.output_type == "stream"
    )


def test_every_notebook_is_expected():
    assert sorted(p.stem for p in NOTEBOOKS.glob("*.ipynb")) == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_committed_notebook_has_no_outputs(name):
    book = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)
    nbformat.validate(book)
    for cell in book.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None, f"{name}: outputs not stripped"


def kinds(book) -> dict[str, int]:
    counts = {"image/png": 0, "html_img": 0}
    for cell in book.cells:
        for output in cell.get("outputs", []):
            data = output.get("data", {})
            if "image/png" in data:
                counts["image/png"] += 1
            if "<img" in data.get("text/html", ""):
                counts["html_img"] += 1
    return counts


def figure(book) -> bytes:
    """The first PNG of the first cell tagged "figure"."""
    for cell in book.cells:
        if "figure" in cell.metadata.get("tags", []):
            for output in cell.outputs:
                if "image/png" in output.get("data", {}):
                    return base64.b64decode(output["data"]["image/png"])
    raise AssertionError("no figure in the cells tagged 'figure'")


@pytest.mark.testbed  # a Jupyter kernel in a subprocess; scale.ipynb starts a LocalCluster
@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_notebook_runs_and_shows_its_figures(name, tmp_path, monkeypatch):
    from nbclient import NotebookClient

    monkeypatch.setenv("STAC_GDAL_MCP_WORKSPACE", str(tmp_path / "workspace"))
    monkeypatch.setenv("MPLBACKEND", "module://matplotlib_inline.backend_inline")
    book = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)
    client = NotebookClient(
        book,
        timeout=CELL_TIMEOUT_S,
        kernel_name="python3",  # ipykernel's kernelspec in this environment's share/jupyter
        resources={"metadata": {"path": str(tmp_path)}},  # the working folder
    )
    client.execute()
    errors = [o for cell in book.cells for o in cell.get("outputs", []) if o.output_type == "error"]
    assert not errors
    assert kinds(book) == EXPECTED[name]
    text = printed(book)
    for pattern, count in PRINTED[name]:
        found = re.findall(pattern, text, flags=re.M)
        assert len(found) == count, f"{name}: {count} line(s) like {pattern!r} expected in:\n{text}"
    for words in NEVER_PRINTED:
        assert words not in text, f"{name} printed {words!r}:\n{text}"
    png = figure(book)
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    folder = os.environ.get("NOTEBOOK_FIGURES")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        (Path(folder) / f"notebook-{name}.png").write_bytes(png)
