"""Shutdown and errors across the boundary: Ctrl-C while waiting, exceptions in
the consumer's loop, fork() with a live loader, interpreter exit."""
import errno
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


def read_line(p, limit_s=120):
    """A line of the child's output; a hang guard, not a performance bound."""
    import select
    ready, _, _ = select.select([p.stdout], [], [], limit_s)
    if not ready:
        p.kill()
        pytest.fail("the child hung")
    return p.stdout.readline().strip()


def test_ctrl_c_interrupts_a_wait_that_cannot_end(tmp_path):
    """The only record is a FIFO nobody writes to: its worker blocks in open(),
    so the batch never comes. Ctrl-C must still raise KeyboardInterrupt in the
    consumer; then writing to the FIFO releases the worker and the loader
    closes. No timing: a missed interrupt shows as the subprocess timing out."""
    fifo = tmp_path / "stuck.jpg"
    os.mkfifo(fifo)
    lst = tmp_path / "stuck.csv"
    lst.write_text(f"{fifo},0\n")
    code = (
        "import signal, sys; sys.path.insert(0, sys.argv[1]); import stoker\n"
        # A shell's background job starts with SIGINT ignored; Python then keeps
        # it ignored. Install Python's usual handler, as an interactive run has.
        "signal.signal(signal.SIGINT, signal.default_int_handler)\n"
        # kind='image': no probe of record 0 at construction (it would block on the FIFO there);
        # on_corrupt='raise': the FIFO's junk is not retried (skip would reopen the FIFO).
        "l = stoker.Loader(sys.argv[2], batch_size=1, threads=1, kind='image', on_corrupt='raise',"
        " transforms=[stoker.Resize((8, 8))])\n"
        "it = iter(l)\n"
        "try:\n"
        "    print('waiting', flush=True)\n"
        "    next(it)\n"
        "    print('batch', flush=True)\n"
        "except KeyboardInterrupt:\n"
        "    print('interrupted', flush=True)\n"
        "sys.stdin.readline()\n"  # the parent unblocks the worker, then says go on
        "del it, l\n"
        "print('closed', flush=True)\n"
    )
    p = subprocess.Popen([sys.executable, "-c", code, PKG, str(lst)], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True)
    assert read_line(p) == "waiting"
    p.send_signal(signal.SIGINT)
    assert read_line(p) == "interrupted"
    # Releases the worker's open(); it reads junk and counts it. Non-blocking,
    # retried while no reader has the FIFO open yet (ENXIO: the worker may not
    # have reached its open() when the interrupt came), so a worker that never
    # opens it fails the test instead of hanging it.
    deadline = time.monotonic() + 120
    while True:
        try:
            w = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
            break
        except OSError as e:
            if e.errno != errno.ENXIO or time.monotonic() > deadline:
                raise
            time.sleep(0.01)
    os.write(w, b"junk")
    os.close(w)
    p.stdin.write("\n")
    p.stdin.flush()
    out, _ = p.communicate(timeout=120)
    assert out.strip() == "closed" and p.returncode == 0


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
