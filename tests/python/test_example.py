"""The C++ quick start: the libtorch training example runs on a stoker loader."""
import os
import subprocess

import pytest

BUILD = os.environ.get("STOKER_BUILD", os.path.join(os.path.dirname(__file__), "..", "..", "build"))
EXE = os.path.join(BUILD, "examples", "train_cnn")


@pytest.mark.skipif(not os.path.exists(EXE), reason="train_cnn not built (needs libtorch-dev)")
def test_train_cnn_runs_and_learns_something(photos):
    out = subprocess.run([EXE, photos, "--steps", "60", "--size", "32", "--batch-size", "8"], capture_output=True,
                         text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    assert "4 classes" in out.stdout
    lines = [l for l in out.stdout.splitlines() if l.startswith("step")]
    assert len(lines) == 1  # step 50
    assert "loader:" in out.stdout
