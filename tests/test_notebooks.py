"""The notebooks run: every code cell of each notebook is executed in order, offline."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

NOTEBOOKS = sorted((Path(__file__).parent.parent / "notebooks").glob("*.ipynb"))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_code_cells_run(path, tmp_path, monkeypatch):
    monkeypatch.setenv("STAC_GDAL_MCP_WORKSPACE", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    for n, cell in enumerate(json.loads(path.read_text())["cells"]):
        if cell["cell_type"] == "code":
            source = "".join(cell["source"])
            exec(compile(source, f"{path.name}[cell {n}]", "exec"), namespace)
