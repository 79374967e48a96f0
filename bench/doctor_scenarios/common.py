"""What the doctor's known-truth scenarios share: their data (made once, seeded), the model step, and the
script's own clock.

Every scenario is a training script a user could have written, with one known bottleneck, run as
`python3 SCENARIO.py DATA [--seconds S] [--fix NAME]`: without --fix as the doctor sees it, with --fix as
it runs once one of the doctor's suggestions is applied (the port to stoker's DataLoader is applied by
bench/doctor_bench.py from the doctor's own diff instead). Each prints one JSON line: the rate the script's
own clock measured (samples per second of training, after its first epoch, time between epochs left out).
"""
import argparse
import json
import os
import time

import numpy as np

MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]


def parse_args():
    """A scenario's command line: DATA [--seconds S] [--fix NAME]."""
    ap = argparse.ArgumentParser()
    ap.add_argument("data")
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--fix", default="")
    return ap.parse_args()


def photo(w, h, seed):
    """Photo-like pixels (smooth waves plus grain): JPEG decodes at a realistic cost."""
    from PIL import Image
    r = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w].astype(np.float32)
    img = np.stack([128 + 100 * np.sin(x / (40 + 10 * c) + seed) * np.cos(y / (30 + 7 * c)) for c in range(3)], -1)
    img += r.normal(0, 25, img.shape)
    return Image.fromarray(np.clip(img, 0, 255).astype(np.uint8))


def make_data(d):
    """large/: 256 x 640x480 q95 4:4:4 (decode-heavy); medium/: 256 x 320x240 q95 4:4:4; small/: 256 x
    96x96 q90; val/: 64 x 96x96; pipes/: 160 records of 256x256 q90 served through named pipes (slow storage,
    see feed_pipes). Two classes each. Made once: a marker file says the set is complete."""
    done = os.path.join(d, ".complete-v2")
    if os.path.exists(done):
        return
    for cls in range(2):
        for sub in ("large", "medium", "small", "val", "pipes"):
            os.makedirs(os.path.join(d, sub, f"c{cls}"), exist_ok=True)
        for i in range(128):
            photo(640, 480, cls * 1000 + i).save(os.path.join(d, "large", f"c{cls}", f"{i}.jpg"), quality=95,
                                                 subsampling=0)
            photo(320, 240, cls * 1000 + i).save(os.path.join(d, "medium", f"c{cls}", f"{i}.jpg"), quality=95,
                                                 subsampling=0)
            photo(96, 96, cls * 1000 + i).save(os.path.join(d, "small", f"c{cls}", f"{i}.jpg"), quality=90)
        for i in range(32):
            photo(96, 96, 5000 + cls * 1000 + i).save(os.path.join(d, "val", f"c{cls}", f"{i}.jpg"), quality=90)
    lines = []
    for i in range(160):
        base = os.path.join(d, "pipes", f"{i}.jpg")
        photo(256, 256, 9000 + i).save(base + ".bytes", format="JPEG", quality=90)
        if not os.path.exists(base + ".pipe"):
            os.mkfifo(base + ".pipe")
        lines.append(f"{i}.jpg.pipe,{i % 2}")
    with open(os.path.join(d, "pipes", "list.csv"), "w") as f:
        f.write("\n".join(lines) + "\n")
    open(done, "w").close()


def feed_pipes(folder, delay, stop):
    """Named pipes standing in for slow storage (a throttled read): each open of a record gets its bytes after
    `delay` seconds."""
    import threading
    pipes = sorted(os.path.join(folder, f) for f in os.listdir(folder) if f.endswith(".pipe"))

    def serve(path):
        with open(path[: -len(".pipe")] + ".bytes", "rb") as f:
            payload = f.read()
        while not stop.is_set():
            fd = os.open(path, os.O_WRONLY)  # blocks until a reader opens it
            time.sleep(delay)
            try:
                os.write(fd, payload)
            except BrokenPipeError:
                pass
            os.close(fd)
            # NOTE: reopening at once would hand the reader, still open, a second writer (and no EOF).
            time.sleep(0.05)

    for p in pipes:
        threading.Thread(target=serve, args=(p,), daemon=True).start()


class Step:
    """The model step: a linear layer's forward and backward on one core (torch.set_num_threads(1)), a fixed
    amount of CPU work per batch (`width` sets it), so that other threads on the cores lengthen it as they
    would a real model's. Or, with sleep_ms, a step that waits (as on a GPU)."""

    def __init__(self, width=64, sleep_ms=0.0):
        import torch
        torch.set_num_threads(1)
        self.torch = torch
        g = torch.Generator().manual_seed(0)
        self.x = torch.randn(16, 4096, generator=g)
        self.w = torch.randn(4096, width, generator=g, requires_grad=True) if width > 0 else None
        self.sleep = sleep_ms / 1e3

    def __call__(self):
        if self.w is not None:
            y = (self.x @ self.w).relu().sum()
            y.backward()
            with self.torch.no_grad():
                self.w -= 1e-6 * self.w.grad
                self.w.grad = None
        if self.sleep > 0:
            time.sleep(self.sleep)


class Clock:
    """The script's own clock, as a training script's logger keeps it: samples and seconds of training after
    the first epoch, the time between epochs (evaluation) apart."""

    def __init__(self, seconds):
        self.seconds = seconds
        self.start = time.monotonic()
        self.epoch = 0
        self.samples = 0
        self.train_s = 0.0
        self.between_s = 0.0
        self._pending = 0.0
        self._t = None

    def running(self):
        return time.monotonic() - self.start < self.seconds

    def epoch_start(self):
        self._t = time.monotonic()
        self.between_s += self._pending
        self._pending = 0.0

    def epoch_end(self, samples):
        t = time.monotonic()
        if self.epoch > 0:
            self.samples += samples
            self.train_s += t - self._t
        self.epoch += 1
        return t

    def between(self, t0):
        """The time since the epoch ended at t0: between epochs (evaluation), never training; counted once
        another epoch starts (an evaluation after the last epoch is after training, not between epochs)."""
        self._pending += time.monotonic() - t0

    def report(self, scenario, fix, **extra):
        rate = self.samples / self.train_s if self.train_s > 0 else 0.0
        print(json.dumps({"scenario": scenario, "fix": fix or "", "rate": rate, "epochs": self.epoch,
                          "samples": self.samples, "train_s": self.train_s, "between_s": self.between_s, **extra}),
              flush=True)


def train(loader, step, clock, between=None):
    """Epochs of `loader` until the clock's time is up (each epoch whole: the rate is of whole epochs), the step
    after each batch and `between()` after each epoch."""
    while clock.running():
        clock.epoch_start()
        n = 0
        for x, y in loader:
            n += int(y.shape[0])
            step()
        t = clock.epoch_end(n)
        if between is not None and clock.running():
            between()
            clock.between(t)
