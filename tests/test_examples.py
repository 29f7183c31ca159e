"""Every example runs (short settings), and so does `graphc demo`, as a user would run them."""
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = {
    "quickstart.py": [],
    "train_mlp.py": ["--epochs", "2"],
    "train_cnn_digits.py": ["--epochs", "1"],
    "export_and_infer.py": [],
    "resnet_block.py": ["--epochs", "1"],
}


@pytest.mark.parametrize("script", sorted(EXAMPLES))
def test_example_runs(script, tmp_path):
    done = subprocess.run([sys.executable, str(ROOT / "examples" / script), *EXAMPLES[script]],
                          capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "Traceback" not in done.stderr


def test_every_example_is_smoke_tested():
    assert {p.name for p in (ROOT / "examples").glob("*.py")} == set(EXAMPLES)


def test_demo_runs_end_to_end(tmp_path):
    out = tmp_path / "demo"
    done = subprocess.run([sys.executable, "-m", "graphc", "demo", "--epochs", "2", "--out", str(out)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "test accuracy: 0." in done.stdout
    assert "predictions match" in done.stdout
    for name in ("train.graphc", "model.graphc", "graph.txt", "graph.dot", "graph.svg", "graph.html"):
        assert (out / name).stat().st_size > 0, name
    # the test extra has onnx, so the demo writes its ONNX export too and imports it back
    assert "exported model.onnx (open it in Netron) and imported it back: its predictions match" in done.stdout
    # every node names the demo's own model code, never the launcher (runpy, the console script)
    import graphc as gc

    for name in ("train.graphc", "model.graphc", "model.onnx"):
        sources = {node.meta.get("source", "") for node in gc.load(out / name).graph.nodes}
        assert sources and all(s.startswith("demo.py:") for s in sources), (name, sorted(sources))
    text = (out / "graph.txt").read_text()
    assert "runpy" not in text and " at graphc:" not in text and " at demo.py:" in text


def test_demo_bad_option_is_one_clear_line():
    done = subprocess.run([sys.executable, "-m", "graphc", "demo", "--epochs", "0"], capture_output=True, text=True)
    assert done.returncode == 2
    assert "Traceback" not in done.stderr and "graphc: error:" in done.stderr


def test_readme_tour_runs_as_written(tmp_path):
    """The README's tour (the classic loop compiled with one call) runs as a user would paste it."""
    readme = (ROOT / "README.md").read_text()
    tour = readme.split("## A short tour", 1)[1].split("```python\n", 1)[1].split("```", 1)[0]
    assert "loss.backward()" in tour and "gc.compile(train_step" in tour
    done = subprocess.run([sys.executable, "-c", tour], capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    for name in ("train.graphc", "model.graphc", "graph.html"):
        assert (tmp_path / name).stat().st_size > 0, name
