"""Shutdown and errors across the boundary: Ctrl-C while waiting, exceptions in
the consumer's loop, fork() with a live loader, interpreter exit."""
import gc
import os
import signal
import subprocess
import sys
import time

import pytest
import torch
from PIL import Image

import stoker

PKG = os.path.join(os.path.dirname(__file__), "..", "..", "python")


@pytest.fixture(scope="module")
def slow_list(tmp_path_factory):
    """128 entries of one large JPEG: a batch of them takes seconds to make."""
    d = tmp_path_factory.mktemp("slow")
    big = d / "big.jpg"
    Image.radial_gradient("L").resize((4000, 3000)).convert("RGB").save(big, quality=90)
    lst = d / "slow.csv"
    lst.write_text("".join(f"{big},0\n" for _ in range(128)))
    return str(lst)


def test_ctrl_c_interrupts_a_long_wait(slow_list):
    code = (
        "import signal, sys, time; sys.path.insert(0, sys.argv[1]); import stoker\n"
        # A shell's background job starts with SIGINT ignored; Python then keeps
        # it ignored. Install Python's usual handler, as an interactive run has.
        "signal.signal(signal.SIGINT, signal.default_int_handler)\n"
        "l = stoker.Loader(sys.argv[2], batch_size=128, threads=1, transforms=[stoker.Resize((8, 8))])\n"
        "it = iter(l)\n"
        "print('waiting', flush=True)\n"
        "try:\n"
        "    next(it)\n"
        "    print('batch', flush=True)\n"
        "except KeyboardInterrupt:\n"
        "    print('interrupted', time.time(), flush=True)\n"
        "del it, l\n"
        "print('closed', time.time(), flush=True)\n"
    )
    p = subprocess.Popen([sys.executable, "-c", code, PKG, slow_list], stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "waiting"
    time.sleep(1.0)
    sent = time.time()
    p.send_signal(signal.SIGINT)
    out, _ = p.communicate(timeout=120)
    lines = out.split("\n")
    assert lines[0].startswith("interrupted"), out
    # The batch would take well over 10 s; the interrupt lands within a few
    # slices of 50 ms, and closing waits only for the sample in hand.
    assert float(lines[0].split()[1]) - sent < 3.0
    assert lines[1].startswith("closed") and float(lines[1].split()[1]) - sent < 6.0


def test_exception_in_the_consumer_loop_leaves_the_loader_usable(numbered):
    loader = stoker.Loader(numbered, batch_size=4, transforms=[stoker.Resize((8, 8))])
    with pytest.raises(RuntimeError, match="boom"):
        for x, y in loader:
            raise RuntimeError("boom")
    loader.set_epoch(0)
    assert [int(v) for _, y in loader for v in y] == list(range(37))


def test_fork_with_a_live_loader(numbered):
    loader = stoker.Loader(numbered, batch_size=4, transforms=[stoker.Resize((8, 8))], threads=2)
    it = iter(loader)
    next(it)
    pid = os.fork()
    if pid == 0:  # the child: the loader must refuse, then be collected without a hang
        code = 1
        try:
            next(it)
        except ValueError as e:
            code = 0 if "after fork()" in str(e) else 2
        del it, loader
        gc.collect()
        os._exit(code)
    deadline = time.time() + 60
    while time.time() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        time.sleep(0.05)
    else:
        os.kill(pid, signal.SIGKILL)
        pytest.fail("the child hung")
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
    assert len([y for _, y in it]) == len(loader) - 1, "the parent goes on"


def test_torch_dataloader_workers_fork_beside_a_live_loader(numbered):
    loader = stoker.Loader(numbered, batch_size=4, transforms=[stoker.Resize((8, 8))])
    it = iter(loader)
    next(it)
    ds = torch.utils.data.TensorDataset(torch.arange(100))
    total = sum(int(b[0].sum()) for b in torch.utils.data.DataLoader(ds, batch_size=10, num_workers=2))
    assert total == sum(range(100))
    assert len([y for _, y in it]) == len(loader) - 1


def test_interpreter_exit_mid_epoch_with_threads_blocked(numbered):
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]); import stoker\n"
        "loaders = [stoker.Loader(sys.argv[2], batch_size=1, prefetch=2, transforms=[stoker.Resize((8, 8))])"
        " for _ in range(3)]\n"
        "its = [iter(l) for l in loaders]\n"
        "[next(i) for i in its]\n"  # workers now blocked on a full ring
        "print('exiting', flush=True)\n"
    )
    out = subprocess.run([sys.executable, "-c", code, PKG, numbered], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and "exiting" in out.stdout, out.stderr
