"""The examples train: the C++ libtorch example, examples/train_classifier.py, train_segmentation.py and train_detection.py."""
import os
import subprocess
import sys

import pytest

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
BUILD = os.environ.get("STOKER_BUILD", os.path.join(ROOT, "build"))
EXE = os.path.join(BUILD, "examples", "train_cnn")


@pytest.mark.skipif(not os.path.exists(EXE), reason="train_cnn not built (needs libtorch-dev)")
def test_train_cnn_runs_one_short_epoch(photos):
    out = subprocess.run([EXE, photos, "--epochs", "1", "--size", "32", "--batch-size", "4", "--holdout", "3"], capture_output=True,
                         text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    assert "16 train / 8 held-out images, 4 classes" in out.stdout
    assert "epoch 0: loss" in out.stdout and "held-out accuracy" in out.stdout and "waited for data" in out.stdout


@pytest.mark.parametrize("loader", ["stoker", "torch"])
def test_train_classifier_runs_one_short_epoch(photos, loader):
    out = subprocess.run([sys.executable, os.path.join(ROOT, "examples", "train_classifier.py"), photos, "--epochs",
                          "1", "--size", "32", "--batch-size", "4", "--loader", loader, "--workers", "2", "--holdout", "3"],
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    assert "16 train / 8 held-out images, 4 classes, 1 rank(s)" in out.stdout
    assert "epoch 0: loss" in out.stdout and "images/s" in out.stdout


def test_train_classifier_two_ranks(photos):
    """Two ranks launched with torchrun's environment contract (RANK, WORLD_SIZE,
    LOCAL_RANK, MASTER_ADDR, MASTER_PORT). NOTE: Debian's torchrun (torch 1.13 on
    Python 3.11) fails before starting any rank (its Std enum compares False with
    ints: "'NoneType' object has no attribute 'get'"), so the test starts the
    ranks itself, as torchrun would."""
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    procs = []
    for rank in range(2):
        env = dict(os.environ, OMP_NUM_THREADS="1", RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE="2",
                   MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        procs.append(subprocess.Popen([sys.executable, os.path.join(ROOT, "examples", "train_classifier.py"), photos,
                                       "--epochs", "1", "--size", "32", "--batch-size", "4", "--workers", "1",
                                       "--holdout", "3"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                      env=env))
    outs = [p.communicate(timeout=600) for p in procs]
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0, err[-3000:]
    assert "2 rank(s)" in outs[0][0] and "epoch 0: loss" in outs[0][0]
    assert outs[1][0] == "", "only rank 0 prints"


@pytest.fixture(scope="module")
def segdet(photos, tmp_path_factory):
    """bench/seg_det_data.py's segmentation list and COCO file over the test photos."""
    out = tmp_path_factory.mktemp("segdet")
    subprocess.run([sys.executable, os.path.join(ROOT, "bench", "seg_det_data.py"), "--src", photos, "--out",
                    str(out), "--count", "12"], check=True, capture_output=True, timeout=600)
    return out


@pytest.mark.parametrize("loader", ["stoker", "torch"])
def test_train_segmentation_runs_a_few_steps(segdet, loader):
    out = subprocess.run([sys.executable, os.path.join(ROOT, "examples", "train_segmentation.py"),
                          str(segdet / "seg.csv"), "--loader", loader, "--steps", "3", "--batch-size", "4", "--size",
                          "32", "--workers", "2", "--log-every", "1"], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    assert "step 3: loss" in out.stdout and "images/s" in out.stdout and "waited for data" in out.stdout


def test_train_detection_runs_a_step_on_stoker_targets(segdet, photos):
    out = subprocess.run([sys.executable, os.path.join(ROOT, "examples", "train_detection.py"),
                          str(segdet / "instances.json"), "--image-root", photos, "--steps", "1", "--batch-size", "2",
                          "--size", "96", "--workers", "2"], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    assert "step 1: loss" in out.stdout and "images/s" in out.stdout
