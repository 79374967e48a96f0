"""stoker doctor's zero-code timing of torch DataLoader loops
(python/stoker/_doctor_site/sitecustomize.py + the recorder in
python/stoker/_profiling.py): the hook alone in child interpreters, then
`stoker doctor` on an unmodified training script against the same loop wrapped
in stoker.profile. Assertions are on counts, formats and verdict categories,
never on times."""
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap

import pytest

from conftest import ROOT
from test_doctor import CLI, PYTHONPATH, _photo

HERE = os.path.dirname(os.path.abspath(__file__))
SITE = os.path.join(ROOT, "python", "stoker", "_doctor_site")
PLAIN = os.path.join(HERE, "plain_dataloader_train.py")
PROFILE_STATS = {"name", "batches", "samples", "wait_s", "step_s", "wall_s", "wait_share"}  # stoker.profile's stats()


def child(code, tmp_path, channel=True, path=(SITE,), env=None):
    """Runs `code` in a fresh /usr/bin/python3 (the tests' interpreter) with
    PYTHONPATH=path and, if channel, STOKER_DOCTOR=<tmp_path>/channel."""
    e = {k: v for k, v in os.environ.items() if k not in ("STOKER_DOCTOR", "STOKER_TRACE", "PYTHONPATH")}
    e["PYTHONPATH"] = os.pathsep.join(path)
    if channel:
        os.makedirs(tmp_path / "channel", exist_ok=True)
        e["STOKER_DOCTOR"] = str(tmp_path / "channel")
    e.update(env or {})
    p = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=e, cwd=tmp_path, capture_output=True,
                       text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    return p


def snapshots(channel):
    """The profile snapshots in a channel directory, by file name."""
    out = {}
    for n in sorted(os.listdir(channel)):
        assert not n.endswith(".tmp"), n
        assert re.fullmatch(r"profile-\d+-\d+\.json", n), n
        with open(os.path.join(channel, n)) as f:
            out[n] = json.load(f)
    return out


def by_batch_size(snaps):
    out = {}
    for s in snaps.values():
        assert s["info"]["batch_size"] not in out, "two series for one DataLoader"
        out[s["info"]["batch_size"]] = s
    return out


LOOPS = """
import torch
from torch.utils.data import DataLoader, TensorDataset

def data(n):
    return TensorDataset(torch.arange(n, dtype=torch.float32).reshape(n, 1), torch.zeros(n, dtype=torch.int64))

class MyLoader(DataLoader):  # a subclass, with an __iter__ of its own
    def __iter__(self):
        return super().__iter__()

single = DataLoader(data(100), batch_size=8)  # num_workers=0, two full epochs: 26 batches, 200 samples
for epoch in range(2):
    for x, y in single:
        pass
persistent = DataLoader(data(100), batch_size=10, num_workers=2, persistent_workers=True)
for i, (x, y) in enumerate(persistent):  # break after 3 batches, then a full epoch: 13 batches, 130 samples
    if i == 2:
        break
for x, y in persistent:
    pass
for i, (x, y) in enumerate(DataLoader(data(60), batch_size=5, num_workers=2)):  # break: 4 batches, 20 samples
    if i == 3:
        break
sub = MyLoader(data(21), batch_size=7)  # 3 batches, 21 samples
for x, y in sub:
    pass
for epoch in range(2):  # a DataLoader made anew each epoch, same settings: one series, 6 batches, 18 samples
    for x, y in DataLoader(data(9), batch_size=3):
        pass
"""


def test_hook_times_every_dataloader_loop(tmp_path):
    p = child(LOOPS, tmp_path)
    assert "stoker doctor" not in p.stderr, p.stderr
    snaps = snapshots(tmp_path / "channel")
    loops = by_batch_size(snaps)
    assert set(loops) == {8, 10, 5, 7, 3}
    expected = {8: (0, 26, 200, "DataLoader"), 10: (2, 13, 130, "DataLoader"), 5: (2, 4, 20, "DataLoader"),
                7: (0, 3, 21, "MyLoader"), 3: (0, 6, 18, "DataLoader")}
    pids = set()
    for bs, (workers, batches, samples, name) in expected.items():
        s = loops[bs]
        assert s["kind"] == "profile" and s["final"] is True
        assert s["info"]["auto"] is True
        assert s["info"]["num_workers"] == workers
        assert s["info"]["dataset"] == "torch.utils.data.dataset.TensorDataset"
        assert set(s["stats"]) == PROFILE_STATS
        assert s["stats"]["name"] == name
        assert (s["stats"]["batches"], s["stats"]["samples"]) == (batches, samples), (bs, s["stats"])
        assert s["stats"]["wait_s"] > 0 and s["stats"]["step_s"] >= 0 and 0 < s["stats"]["wait_share"] <= 1
        pids.add(s["pid"])
    assert len(pids) == 1  # the training process, not the workers
    assert all(n == f"profile-{s['pid']}-{s['id']}.json" for n, s in snaps.items())


def test_same_snapshot_as_stoker_profile_and_no_loop_counted_twice(tmp_path):
    """One DataLoader over an ImageFolder: an epoch unwrapped (timed by the hook),
    then epochs in stoker.profile(loader) and stoker.profile(enumerate(loader)):
    each batch is in exactly one series, and the hook's info is profile's plus auto."""
    for c in range(2):
        os.makedirs(tmp_path / "images" / f"c{c}")
        for i in range(6):
            _photo(40, 32, c * 100 + i).save(tmp_path / "images" / f"c{c}" / f"{i}.jpg")
    p = child(f"""
        import torch, torchvision, torchvision.transforms as T
        import stoker
        ds = torchvision.datasets.ImageFolder({str(tmp_path / "images")!r}, transform=T.ToTensor())
        loader = torch.utils.data.DataLoader(ds, batch_size=4, num_workers=2, persistent_workers=True)
        for x, y in loader:                           # 3 batches, timed by the hook
            pass
        p = stoker.profile(loader)
        for x, y in p:                                # 3 batches, stoker.profile's
            pass
        for i, (x, y) in stoker.profile(enumerate(loader), name="enumerate"):  # 3 batches, stoker.profile's
            pass
        for x, y in loader:                           # 3 more for the hook
            pass
        """, tmp_path, path=(SITE, PYTHONPATH))
    assert "stoker doctor" not in p.stderr, p.stderr
    snaps = list(snapshots(tmp_path / "channel").values())
    auto = [s for s in snaps if s["info"].get("auto")]
    wrapped = {s["stats"]["name"]: s for s in snaps if not s["info"].get("auto")}
    assert len(auto) == 1 and set(wrapped) == {"DataLoader", "enumerate"}
    a, w = auto[0], wrapped["DataLoader"]
    assert (a["stats"]["batches"], a["stats"]["samples"]) == (6, 24)
    assert (w["stats"]["batches"], w["stats"]["samples"]) == (3, 12)
    assert wrapped["enumerate"]["stats"]["batches"] == 3
    assert a["id"] != w["id"]
    # The hook also times the DataLoader's collate_fn where it runs (its workers): "collate".
    assert set(a) == set(w) | {"collate"} and set(a["stats"]) == set(w["stats"]) == PROFILE_STATS
    info = dict(a["info"])
    assert info.pop("auto") is True
    assert info.pop("where").startswith("<string>:") and "caller" not in info  # the loop's line in the program
    assert info == w["info"]  # type, dataset, num_workers, batch_size, files, root, dataset_size
    assert info["dataset_size"] == 12 and len(info["files"]) == 12 and info["root"] == str(tmp_path / "images")


def test_without_stoker_doctor_nothing_happens(tmp_path):
    p = child(LOOPS + """
import sys, torch.utils.data.dataloader as dl
print(getattr(dl._BaseDataLoaderIter.__next__, "_stoker_auto", False), "_stoker_autoprofile" in sys.modules)
""", tmp_path, channel=False)
    assert p.stdout.split() == ["False", "False"]
    assert os.listdir(tmp_path) == [], "something was written without STOKER_DOCTOR"


@pytest.mark.parametrize("channel", [False, True])
def test_torch_not_imported_at_startup(tmp_path, channel):
    p = child("""
        import sys
        print("torch" in sys.modules, "_stoker_autoprofile" in sys.modules, "stoker" in sys.modules)
        """, tmp_path, channel=channel)
    assert p.stdout.split() == ["False", "False", "False"]
    assert p.stderr == ""


def test_chains_to_the_sitecustomize_it_hides(tmp_path):
    other = tmp_path / "other"
    other.mkdir()
    (other / "sitecustomize.py").write_text(
        "import builtins, os\n"
        "builtins._chained_runs = getattr(builtins, '_chained_runs', 0) + 1\n"
        "os.environ['CHAINED_SITECUSTOMIZE'] = 'yes'\n"
        "MARK = 42\n")
    code = """
        import builtins, os, sitecustomize
        print(os.environ.get("CHAINED_SITECUSTOMIZE"), getattr(sitecustomize, "MARK", None), builtins._chained_runs,
              sitecustomize.__file__)
        """
    for channel in (False, True):
        for path in ((SITE, str(other)), (SITE, SITE, str(other))):  # also doctor inside doctor: ours twice
            out = child(code, tmp_path, channel=channel, path=path).stdout.split()
            assert out == ["yes", "42", "1", str(other / "sitecustomize.py")], (channel, path, out)
    # With nothing of the user's: the distribution's own sitecustomize (Debian has one), if any, as without ours.
    code = """
        try:
            import sitecustomize
            print(sitecustomize.__file__)
        except ImportError:
            print("none")
        """
    without = child(code, tmp_path, channel=False, path=()).stdout
    assert child(code, tmp_path, channel=True, path=(SITE,)).stdout == without
    assert child(code, tmp_path, channel=False, path=(SITE,)).stdout == without


def test_errors_of_the_hidden_sitecustomize_reported_as_without_ours(tmp_path):
    other = tmp_path / "other"
    other.mkdir()
    (other / "sitecustomize.py").write_text("raise RuntimeError('boom')\n")
    code = "print('ran')"
    alone = child(code, tmp_path, channel=False, path=(str(other),))
    ours = child(code, tmp_path, channel=True, path=(SITE, str(other)))
    assert ours.stdout == alone.stdout == "ran\n"
    assert ours.stderr == alone.stderr and "boom" in alone.stderr


def test_our_errors_never_break_the_program(tmp_path):
    # A channel directory that cannot be written: the loops run, nothing said.
    p = child(LOOPS, tmp_path, env={"STOKER_DOCTOR": str(tmp_path / "missing" / "dir")})
    assert p.stderr == ""
    # The site directory copied where _profiling.py is not next to it and stoker is not on the path: one line.
    lone = tmp_path / "lone_site"
    lone.mkdir()
    shutil.copy(os.path.join(SITE, "sitecustomize.py"), lone)
    p = child(LOOPS + "print('done')", tmp_path, path=(str(lone),))
    assert p.stdout == "done\n"
    lines = p.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("stoker doctor:"), p.stderr
    # ... and with the stoker package on the path, it finds _profiling.py there without importing stoker.
    shutil.rmtree(tmp_path / "channel", ignore_errors=True)
    p = child(LOOPS + "import sys; print('stoker' in sys.modules)", tmp_path, path=(str(lone), PYTHONPATH))
    assert p.stdout == "False\n" and p.stderr == ""
    assert set(by_batch_size(snapshots(tmp_path / "channel"))) == {8, 10, 5, 7, 3}


@pytest.mark.parametrize("with_stoker", [False, True])
def test_trace_has_the_timed_loops(tmp_path, with_stoker):
    """STOKER_TRACE (doctor --trace): the hook's wait and step spans are in the trace, written once,
    by the hook's copy of _profiling.py or, when the program imported stoker, by stoker's with them."""
    trace = tmp_path / "trace.json"
    code = ("import stoker\n" if with_stoker else "") + LOOPS
    p = child(code, tmp_path, path=(SITE, PYTHONPATH), env={"STOKER_TRACE": str(trace)})
    assert p.stderr == ""
    with open(trace) as f:
        events = json.load(f)["traceEvents"]
    threads = {e["tid"]: e["args"]["name"] for e in events if e["ph"] == "M"}
    assert len(threads) == 5 and all(n.endswith("(timed by stoker doctor)") for n in threads.values()), threads
    spans = [e for e in events if e["ph"] == "X"]
    assert sum(e["name"] == "wait for batch" for e in spans) == 26 + 13 + 4 + 3 + 6
    assert {e["name"] for e in spans} == {"wait for batch", "training step"}
    assert all(e["tid"] in threads and e["dur"] >= 0 for e in spans)


# --- end to end: stoker doctor on the unmodified script -----------------------

@pytest.fixture(scope="module")
def images(tmp_path_factory):
    d = tmp_path_factory.mktemp("autoprofile")
    for c in range(2):
        os.makedirs(d / "large" / f"c{c}")
        os.makedirs(d / "small" / f"c{c}")
        for i in range(32):  # 640x480 q95 4:4:4: a few ms of decode each
            _photo(640, 480, c * 1000 + i).save(d / "large" / f"c{c}" / f"{i}.jpg", quality=95, subsampling=0)
            _photo(96, 96, c * 1000 + i).save(d / "small" / f"c{c}" / f"{i}.jpg", quality=90)
    return d


def doctor(data, tmp_path, name, *script_args):
    js = tmp_path / f"{name}.json"
    env = dict(os.environ, PYTHONPATH=PYTHONPATH)  # for --wrap's `import stoker`; the doctor prepends its site
    env.pop("STOKER_DOCTOR", None)
    p = subprocess.run([CLI, "doctor", "-q", "--no-probe", "--report", "", "--json", str(js), "--",
                        sys.executable, PLAIN, str(data), *script_args], env=env, capture_output=True, text=True,
                       timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    with open(js) as f:
        r = json.load(f)
    r["terminal"] = p.stdout
    r["script"] = json.loads(next(line for line in p.stdout.splitlines() if line.startswith('{"epochs"')))
    r["stderr"] = p.stderr
    return r


@pytest.mark.parametrize("scenario, data, width, seconds, category", [
    ("input", "large", 4, 4, "input-bound"),       # large JPEGs, a tiny model: the loop waits for the workers
    ("compute", "small", 32, 5, "compute-bound"),  # small JPEGs, a wider model: the step dominates
])
def test_doctor_times_an_unmodified_script_like_stoker_profile(images, tmp_path, scenario, data, width, seconds,
                                                               category):
    args = ("--seconds", str(seconds), "--width", str(width))
    plain = doctor(images / data, tmp_path, scenario + "-plain", *args)
    wrapped = doctor(images / data, tmp_path, scenario + "-wrapped", *args, "--wrap")
    for r, auto in ((plain, True), (wrapped, False)):
        assert "stoker doctor:" not in r["stderr"], r["stderr"]
        assert r["verdict"].startswith(category), r["terminal"]
        assert "DataLoader" in r["consumer"] and "ImageFolder" in r["consumer"], r["consumer"]
        assert 0 < r["wait_share"] < 1 and r["step_per_sample_s"] > 0
        # One series for the loop: the hook's without stoker.profile, stoker.profile's alone with it.
        sources = [s for s in r["sources"].values() if s["kind"] == "profile"]
        assert len(sources) == 1, list(r["sources"])
        s = sources[0]
        assert bool(s["info"].get("auto")) is auto
        assert s["info"]["num_workers"] == 2 and s["info"]["dataset_size"] == 64 and s["info"]["files"]
        st = s["stats"]
        assert set(st) == PROFILE_STATS
        # Every batch the script trained on, counted (the loop breaks right after a step).
        assert (st["batches"], st["samples"]) == (r["script"]["batches"], r["script"]["samples"])
        # The verdict's numbers are the snapshot's, after the loop's start-up (the steady window).
        w = r["steady"]
        assert w["skipped_s"] > 0 and w["after"] in ("first epoch", "first fifth"), w
        assert w["skipped_s"] + w["active_s"] == pytest.approx(st["wait_s"] + st["step_s"], rel=1e-6)
        assert 0 < w["samples"] < st["samples"] and 0 < w["wait_s"] <= st["wait_s"]
        assert r["rate"] == pytest.approx(w["samples"] / w["active_s"], rel=1e-6)
        assert r["wait_share"] == pytest.approx(w["wait_s"] / w["active_s"], rel=1e-6)
        assert r["step_per_sample_s"] == pytest.approx((w["active_s"] - w["wait_s"]) / w["samples"], rel=1e-6)
    assert plain["verdict"] == wrapped["verdict"], (plain["terminal"], wrapped["terminal"])



# A fake clock for the recorder: installed before torch is imported (the hook binds time.monotonic_ns when it
# patches), advanced only by sleep(): every time below is attributed exactly, whatever the machine's load.
FAKE_CLOCK = """
import time
class _Clock:
    t = 10 ** 12
def _mono():
    return _Clock.t
def sleep(s):
    _Clock.t += int(round(s * 1e9))
time.monotonic_ns = _mono
"""


def test_iterator_setup_is_waiting_and_time_between_epochs_is_not_the_step(tmp_path):
    """A DataLoader whose iterator takes 0.3 s to start (as its workers do, every epoch), 10 batches of 2 ms loads
    and 50 ms steps, and 0.7 s of evaluation after each of 3 epochs: the set-up is in the wait, the evaluation
    between epochs and out of the step."""
    p = child(FAKE_CLOCK + """
import torch
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.dataloader import _SingleProcessDataLoaderIter

class SlowStart(_SingleProcessDataLoaderIter):
    def __init__(self, loader):
        super().__init__(loader)
        sleep(0.3)  # starting the workers

class Loader(DataLoader):
    def _get_iterator(self):
        return SlowStart(self)

class Data(TensorDataset):
    def __getitem__(self, i):
        sleep(0.002)  # loading a sample
        return super().__getitem__(i)

loader = Loader(Data(torch.zeros(40, 1), torch.zeros(40)), batch_size=4)

def train_one_epoch():
    for x, y in loader:
        sleep(0.05)  # the step

def evaluate():
    sleep(0.7)

for epoch in range(3):
    train_one_epoch()
    evaluate()
""", tmp_path)
    assert "stoker doctor" not in p.stderr, p.stderr
    (s,) = snapshots(tmp_path / "channel").values()
    assert (s["stats"]["batches"], s["stats"]["samples"]) == (30, 120)
    assert s["loop"]["iterations"] == 3
    assert s["loop"]["setup_s"] == pytest.approx(3 * 0.3, abs=1e-6)
    assert s["stats"]["wait_s"] == pytest.approx(3 * 0.3 + 120 * 0.002, abs=1e-6)  # the set-up counted as waiting
    assert s["stats"]["step_s"] == pytest.approx(30 * 0.05, abs=1e-6)  # the evaluation is not in the step
    assert s["loop"]["between_s"] == pytest.approx(2 * 0.7, abs=1e-6)
    assert s["info"]["where"].endswith(" in train_one_epoch")


def test_stoker_loader_counts_all_of_next_and_keeps_epochs_apart(tmp_path):
    """A stoker.Loader under the doctor is timed in Python: the whole of next() is the wait (here 5 ms of Python
    per batch after the C++ wait: a slow batch transform), and 0.5 s between epochs is not the step."""
    pytest.importorskip("stoker._stoker")
    os.makedirs(tmp_path / "images" / "c0")
    for i in range(12):
        _photo(24, 20, i).save(tmp_path / "images" / "c0" / f"{i}.jpg")
    p = child(FAKE_CLOCK + f"""
import stoker

loader = stoker.Loader({str(tmp_path / "images")!r}, batch_size=4, transforms=[stoker.Resize((8, 8))], threads=1)
orig = stoker._Iterator._fetch
def _fetch(self):  # 5 ms of Python in every batch's next(), after the C++ wait (a slow batch transform)
    out = orig(self)
    if out is not None and not isinstance(out, Exception):
        sleep(0.005)
    return out
stoker._Iterator._fetch = _fetch

for epoch in range(2):
    for x, y in loader:
        sleep(0.02)
    sleep(0.5)  # evaluation
""", tmp_path, path=(SITE, PYTHONPATH))
    assert "stoker doctor" not in p.stderr, p.stderr
    profiles = [s for n, s in snapshots_any(tmp_path / "channel").items() if n.startswith("profile-")]
    (s,) = profiles
    assert s["info"]["stoker_loader"] is True and s["info"]["auto"] is True
    assert (s["stats"]["batches"], s["stats"]["samples"]) == (6, 24)
    assert s["loop"]["iterations"] == 2
    assert s["stats"]["wait_s"] == pytest.approx(6 * 0.005, abs=1e-6)  # the Python side of next(), counted
    assert s["stats"]["step_s"] == pytest.approx(6 * 0.02, abs=1e-6)
    assert s["loop"]["between_s"] == pytest.approx(0.5, abs=1e-6)


def snapshots_any(channel):
    """Every snapshot in a channel directory (the loaders' own too), by file name."""
    out = {}
    for n in sorted(os.listdir(channel)):
        if n.endswith(".json"):
            with open(os.path.join(channel, n)) as f:
                out[n] = json.load(f)
    return out


def test_the_probed_pipeline_is_the_scripts(tmp_path):
    """What the doctor's probe runs of a DataLoader's ImageFolder: the script's transform list, echoed transform by
    transform with torchvision's class names and parameters, and the part stoker runs."""
    pytest.importorskip("stoker._stoker")
    os.makedirs(tmp_path / "images" / "c0")
    for i in range(4):
        _photo(40, 32, i).save(tmp_path / "images" / "c0" / f"{i}.jpg")
    p = child(f"""
        import json
        import torch, torchvision, torchvision.transforms as T
        pipelines = {{
            "mapped": T.Compose([T.RandomResizedCrop(24), T.RandomHorizontalFlip(), T.TrivialAugmentWide(),
                                 T.ToTensor(), T.Normalize((0.5, 0.5, 0.5), (0.25, 0.25, 0.25)),
                                 T.RandomErasing(p=0.25)]),
            "partly": T.Compose([T.CenterCrop(24), T.Lambda(lambda im: im), T.ToTensor()]),
            "none": T.Compose([T.Lambda(lambda im: im), T.ToTensor()]),
        }}
        for name, tf in pipelines.items():
            ds = torchvision.datasets.ImageFolder({str(tmp_path / "images")!r}, transform=tf)
            loader = torch.utils.data.DataLoader(ds, batch_size=2)
            for x, y in loader:
                pass
        """, tmp_path, path=(SITE, PYTHONPATH))
    assert "stoker doctor" not in p.stderr, p.stderr
    ports = [s["info"]["port"] for s in snapshots(tmp_path / "channel").values()]
    assert len(ports) == 3
    by = {len(pt["probed_pipeline"]): pt for pt in ports}
    mapped, partly, none = by[6], by[1], by[0]
    names = [t.split("(")[0] for t in mapped["script_pipeline"]]
    assert names == ["RandomResizedCrop", "RandomHorizontalFlip", "TrivialAugmentWide", "ToTensor", "Normalize",
                     "RandomErasing"]
    assert mapped["probed_pipeline"] == mapped["script_pipeline"]
    assert "size=(24, 24)" in mapped["script_pipeline"][0] or "size=24" in mapped["script_pipeline"][0]
    assert "p=0.25" in mapped["script_pipeline"][5]
    assert mapped["pipeline"] == "the script's transforms: " + " + ".join(mapped["script_pipeline"])
    assert [t["name"] for t in mapped["probe"]["transforms"]][:1] == ["RandomResizedCrop"]
    assert "python" not in mapped
    assert [t.split("(")[0] for t in partly["script_pipeline"]] == ["CenterCrop", "Lambda", "ToTensor"]
    assert partly["probed_pipeline"] == partly["script_pipeline"][:1] and partly["python"].startswith("Lambda")
    assert "probe" in partly
    assert "probe" not in none and none["python"].startswith("Lambda")


# The fake clock, plus the loop thread's CPU clock and its run-queue wait, advanced only by cpu() and queued():
# the step's split is attributed exactly, whatever the machine's load.
FAKE_SCHED = FAKE_CLOCK + """
class _Cpu:
    cpu = 0
    runq = 0
time.thread_time_ns = lambda: _Cpu.cpu
def cpu(s):  # CPU work: the thread's CPU clock and the wall clock advance together
    _Cpu.cpu += int(round(s * 1e9))
    sleep(s)
def queued(s):  # runnable, waiting for a core: only the wall clock and the run-queue wait advance
    _Cpu.runq += int(round(s * 1e9))
    sleep(s)
def fake_runq():  # installed once torch is imported (the hook's module exists then)
    import sys
    sys.modules["_stoker_autoprofile"]._runq_ns = lambda: _Cpu.runq
"""


def test_the_step_splits_into_cpu_wait_for_a_core_and_the_rest(tmp_path):
    """A DataLoader (num_workers=0) whose samples take 2 ms of CPU to load and whose collate_fn takes 4 ms of CPU
    per batch; each step 30 ms of CPU, 15 ms waiting for a core and 5 ms asleep (a GPU); 0.7 s between epochs.
    The snapshot's "sched" splits the step and the wait (their shares, measured on a sample of the batches,
    applied to step_s and wait_s), "collate" times the collate_fn."""
    p = child(FAKE_SCHED + """
import torch
from torch.utils.data import DataLoader, TensorDataset, default_collate
fake_runq()

class Data(TensorDataset):
    def __getitem__(self, i):
        cpu(0.002)  # loading a sample
        return super().__getitem__(i)

def collate(samples):
    cpu(0.004)
    return default_collate(samples)

loader = DataLoader(Data(torch.zeros(40, 1), torch.zeros(40)), batch_size=4, collate_fn=collate)
for epoch in range(3):
    for x, y in loader:
        cpu(0.03)
        queued(0.015)
        sleep(0.005)
    sleep(0.7)  # evaluation: neither the step nor the wait
""", tmp_path)
    assert "stoker doctor" not in p.stderr, p.stderr
    (s,) = snapshots(tmp_path / "channel").values()
    assert (s["stats"]["batches"], s["stats"]["samples"]) == (30, 120)
    assert s["stats"]["step_s"] == pytest.approx(30 * 0.05, abs=1e-6)
    sched = s["sched"]
    assert 0 < sched["batches"] < 30  # a sample of the batches (the step before every 4th and its wait)
    assert sched["step_cpu_s"] == pytest.approx(30 * 0.03, abs=1e-6)
    assert sched["step_runq_s"] == pytest.approx(30 * 0.015, abs=1e-6)
    assert sched["wait_cpu_s"] == pytest.approx(120 * 0.002 + 30 * 0.004, abs=1e-6)
    assert sched["wait_runq_s"] == pytest.approx(0, abs=1e-9)
    c = s["collate"]
    assert (c["calls"], c["samples"], c["default"]) == (30, 120, False)
    assert c["fn"] == "__main__.collate"
    assert c["cpu_s"] == pytest.approx(30 * 0.004, abs=1e-6)
    assert set(s["stats"]) == PROFILE_STATS  # stoker.profile's stats() keys unchanged


def test_the_collate_fn_is_timed_in_forked_workers_only(tmp_path):
    """With worker processes started by fork, each worker's collate_fn calls are counted in memory shared with
    the loop's process; with spawn the collate_fn is left as it is (its counters could not be pickled)."""
    p = child("""
import torch
from torch.utils.data import DataLoader, TensorDataset, default_collate

def collate(samples):
    return default_collate(samples)

data = TensorDataset(torch.zeros(60, 1), torch.zeros(60))
for x, y in DataLoader(data, batch_size=5, num_workers=2, collate_fn=collate):
    pass
for x, y in DataLoader(data, batch_size=6, num_workers=2):
    pass
for x, y in DataLoader(data, batch_size=10, num_workers=2, multiprocessing_context="spawn"):
    pass
""", tmp_path)
    assert "stoker doctor" not in p.stderr, p.stderr
    loops = by_batch_size(snapshots(tmp_path / "channel"))
    custom, default, spawned = loops[5], loops[6], loops[10]
    assert (custom["collate"]["calls"], custom["collate"]["samples"]) == (12, 60)
    assert custom["collate"]["default"] is False and custom["collate"]["cpu_s"] > 0
    assert (default["collate"]["calls"], default["collate"]["samples"]) == (10, 60)
    assert default["collate"]["default"] is True
    assert default["collate"]["fn"] == "torch.utils.data._utils.collate.default_collate"
    assert "collate" not in spawned and spawned["stats"]["batches"] == 6
    for s in (custom, default, spawned):
        assert 0 < s["sched"]["batches"] <= s["stats"]["batches"]
        if os.path.exists("/proc/thread-self/schedstat"):
            assert s["sched"]["step_runq_s"] is not None and s["sched"]["wait_runq_s"] is not None


COLLATE_BOUND = """
import sys, time
import torch
from torch.utils.data import DataLoader, TensorDataset, default_collate

def collate(samples):  # per-sample work in Python: ~2 ms of CPU per sample
    for _ in samples:
        t = time.thread_time()
        while time.thread_time() - t < 0.002:
            pass
    return default_collate(samples)

loader = DataLoader(TensorDataset(torch.zeros(64, 3, 8, 8), torch.zeros(64)), batch_size=8, num_workers=2,
                    persistent_workers=True, collate_fn=collate)
start = time.monotonic()
while time.monotonic() - start < float(sys.argv[1]):
    for x, y in loader:
        time.sleep(0.001)
"""


def test_doctor_names_a_collate_bound_loop(tmp_path):
    """A DataLoader whose workers spend their time in a Python collate_fn: input-bound on collate, the
    collate_fn named with its share, nothing predicted for it."""
    script = tmp_path / "collate_bound.py"
    script.write_text(COLLATE_BOUND)
    js = tmp_path / "r.json"
    env = dict(os.environ, PYTHONPATH=PYTHONPATH)
    env.pop("STOKER_DOCTOR", None)
    p = subprocess.run([CLI, "doctor", "-q", "--report", "", "--json", str(js), "--", sys.executable, str(script),
                        "4"], env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    r = json.loads(js.read_text())
    assert r["verdict"] == "input-bound on collate", p.stdout
    assert any(e.startswith("collate: __main__.collate took ") for e in r["evidence"]), r["evidence"]
    s = [x for x in r["suggestions"] if x["action"].startswith("Speed up the collate_fn (__main__.collate)")]
    assert s and s[0]["predicted_rate"] == 0
    if os.path.exists("/proc/thread-self/schedstat"):
        assert r["step"]["runq_s"] is not None
        assert any(e.startswith("the step, ") and "waiting for a core" in e for e in r["evidence"]), r["evidence"]
