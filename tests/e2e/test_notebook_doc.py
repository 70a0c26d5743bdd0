"""``docs/notebook.ipynb`` executed in a real Jupyter kernel (nbclient, ipykernel): it records the
design note with ``distviz.record`` in a spawned 2-worker RPC job and displays it."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from conftest import ROOT
from guards import HANG_GUARD_S

pytestmark = pytest.mark.rpc

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")


def test_the_notebook_records_the_design_note_and_shows_its_viewer(tmp_path: Path) -> None:
    shutil.copy(ROOT / "docs" / "notebook.ipynb", tmp_path)
    nb = nbformat.read(tmp_path / "notebook.ipynb", as_version=4)
    nbclient.NotebookClient(nb, timeout=HANG_GUARD_S, kernel_name="python3",
                            resources={"metadata": {"path": str(tmp_path)}}).execute()
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    shown = [o for o in outputs if o.output_type == "execute_result" and "text/html" in o.data]
    assert len(shown) == 1
    viewer = shown[0].data["text/html"]
    assert viewer.startswith("<iframe srcdoc=") and "distviz-data" in viewer
    assert "worker1/" in viewer and "AccumulateGrad" in viewer
    if "image/svg+xml" in shown[0].data:   # with a Graphviz backend installed
        assert "<svg" in shown[0].data["image/svg+xml"]
    printed = "".join(o.get("text", "") for o in outputs if o.output_type == "stream")
    assert "a DAG: True" in printed
    assert printed.count("path from the loss") == 3   # t1, t2 and t4
    assert (tmp_path / "design_note.trace.json").is_file()
