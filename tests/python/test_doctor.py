"""stoker doctor on training loops with a known bottleneck (doctor_scenarios.py),
stoker.profile, the trace export, and the HTML report rendered by Chromium."""
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest
from PIL import Image

from conftest import ROOT
from doctor_scenarios import _photo, make_data

BUILD = os.environ.get("STOKER_BUILD", os.path.join(ROOT, "build"))
CLI = os.path.join(BUILD, "tools", "stoker")
SCENARIOS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "doctor_scenarios.py")
PYTHONPATH = os.environ.get("STOKER_PYTHONPATH", os.path.join(ROOT, "python"))


@pytest.fixture(scope="module")
def scenario_data(tmp_path_factory):
    d = tmp_path_factory.mktemp("doctor")
    make_data(str(d))
    os.makedirs(d / "pipes")
    lines = []
    for i in range(48):  # records served through named pipes: storage that answers slowly
        os.mkfifo(d / "pipes" / f"{i}.jpg.pipe")
        _photo(96, 96, i).save(d / "pipes" / f"{i}.jpg.bytes", format="JPEG", quality=90)
        lines.append(f"{i}.jpg.pipe,{i % 2}")
    (d / "pipes" / "list.csv").write_text("\n".join(lines) + "\n")
    return d


def run_scenario(mode, data, seconds=5.0, doctor=True, tmp=None, extra=()):
    env = dict(os.environ, PYTHONPATH=PYTHONPATH)
    cmd = [sys.executable, SCENARIOS, mode, str(data), "--seconds", str(seconds)]
    if not doctor:
        out = subprocess.run(cmd, env=env, check=True, capture_output=True, text=True, timeout=300).stdout
        return json.loads(out.strip().splitlines()[-1])
    report, js = os.path.join(tmp, f"{mode}.html"), os.path.join(tmp, f"{mode}.json")
    p = subprocess.run([CLI, "doctor", "-q", "--report", report, "--json", js, *extra, "--", *cmd], env=env,
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr
    with open(js) as f:
        result = json.load(f)
    result["terminal"] = p.stdout
    result["report_path"] = report
    return result


def suggestion(result, text):
    found = [s for s in result.get("suggestions", []) if text in s["action"]]
    assert found, f"no suggestion mentioning {text!r} in {result.get('suggestions')}"
    return found[0]


def test_compute_bound(scenario_data, tmp_path):
    r = run_scenario("compute", scenario_data / "small", seconds=4, tmp=tmp_path)
    assert r["verdict"].startswith("compute-bound"), r["terminal"]
    assert 0 <= r["wait_share"] <= 1
    assert "VERDICT: compute-bound" in r["terminal"]


def test_decode_bound_with_measured_predictions(scenario_data, tmp_path):
    """The verdict and that each measured suggestion carries a range; whether
    the predictions hold when applied is timing, measured by `make bench-doctor`."""
    r = run_scenario("decode", scenario_data / "large", seconds=5, tmp=tmp_path)
    assert r["verdict"] == "input-bound on decode", r["terminal"]
    assert 0 <= r["wait_share"] <= 1
    assert any("decode" in e and "%" in e for e in r["evidence"])
    for text in ('cache="decoded"', "--max-side 256"):
        s = suggestion(r, text)
        assert 0 < s["predicted_lo"] <= s["predicted_rate"] <= s["predicted_hi"], s
        assert "samples/s" in s["basis"]
    assert "probes took" in r["terminal"]  # the probes ran (their duration is not asserted)


def test_a_mixture_is_diagnosed_and_probed(scenario_data, tmp_path):
    """The probes reopen a stoker.Mix from the loader's snapshot (its one JSON
    codec), so the doctor measures its suggestions on the mixture's records."""
    r = run_scenario("mixture", scenario_data, seconds=4, tmp=tmp_path)
    assert r["verdict"], r["terminal"]
    assert "cannot be reopened" not in r["terminal"]
    s = suggestion(r, 'cache="decoded"')
    # Measured on the mixture's own records, reopened from the snapshot.
    assert "measured here on" in s["basis"] and "of the records" in s["basis"], s
    assert "mixture of 2 sources" in r["terminal"]


def test_probes_leave_the_users_shard_indexes_untouched(scenario_data, tmp_path):
    """Shards labelled by a .json field: the doctor's probes reopen them with
    the user's labels= (every option is carried) and build any index they
    need in a temp dir, never beside the user's shards."""
    import io
    import tarfile

    import stoker

    files = sorted((scenario_data / "large").rglob("*.jpg"))[:96]
    shards = []
    for k in range(2):
        path = tmp_path / f"s-{k}.tar"
        with tarfile.open(path, "w") as tar:
            for i, f in enumerate(files[k::2]):
                for name, data in ((f"{i:04d}.jpg", f.read_bytes()), (f"{i:04d}.json", json.dumps({"y": i % 3}).encode())):
                    info = tarfile.TarInfo(name)
                    info.size = len(data)
                    tar.addfile(info, io.BytesIO(data))
        shards.append(path)
    pattern = str(tmp_path / "s-{0..1}.tar")
    for _ in stoker.Loader(pattern, batch_size=8, labels="json:y", transforms=[stoker.CenterCrop(8)]):
        pass  # the user's own loader writes the sidecars
    before = {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in tmp_path.glob("s-*.tar.idx")}
    assert len(before) == 2
    r = run_scenario("json-shards", pattern, seconds=4, tmp=tmp_path)
    assert r["verdict"].startswith("input-bound"), r["terminal"]
    assert "probes took" in r["terminal"], r["terminal"]  # the probes ran
    after = {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in tmp_path.glob("s-*.tar.idx")}
    assert after == before
    assert not list(tmp_path.glob("s-*.tar.idx.tmp*"))


def test_transform_bound(scenario_data, tmp_path):
    r = run_scenario("transform", scenario_data / "small", seconds=4, tmp=tmp_path)
    assert r["verdict"] == "input-bound on transforms", r["terminal"]
    suggestion(r, 'dtype="uint8"')


def test_storage_bound(scenario_data, tmp_path):
    r = run_scenario("storage", scenario_data / "pipes" / "list.csv", seconds=4, tmp=tmp_path)
    assert r["verdict"] == "input-bound on storage", r["terminal"]
    assert any("read" in e for e in r["evidence"])
    suggestion(r, 'cache="ram"')


def test_dataloader_wrapped_in_profile(scenario_data, tmp_path):
    r = run_scenario("dataloader", scenario_data / "large", seconds=5, tmp=tmp_path)
    assert r["verdict"] == "input-bound on decode", r["terminal"]
    assert "DataLoader" in r["consumer"]
    s = suggestion(r, "stoker.Loader")
    assert 0 < s["predicted_lo"] <= s["predicted_rate"] <= s["predicted_hi"], s


def test_command_exit_code_and_missing_command(tmp_path):
    p = subprocess.run([CLI, "doctor", "-q", "--report", "", "--", sys.executable, "-c", "import sys; sys.exit(3)"],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 3
    assert "the command failed (exit 3) after " in p.stdout and "no verdict" in p.stdout  # a failed run: no verdict
    p = subprocess.run([CLI, "doctor", "-q", "--report", "", "--", "/nonexistent/cmd"], capture_output=True, text=True,
                       timeout=60)
    assert p.returncode == 127
    assert "cannot run" in p.stderr


def test_report_renders_charts_in_chromium(scenario_data, tmp_path):
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.fail("chromium is not installed (scripts/install-deps.sh installs it)")
    r = run_scenario("decode", scenario_data / "small", seconds=3, tmp=tmp_path, extra=["--no-probe"])
    shot = tmp_path / "report.png"
    subprocess.run([chromium, "--headless", "--disable-gpu", "--no-sandbox", "--hide-scrollbars",
                    f"--screenshot={shot}", "--window-size=1000,2600", "file://" + r["report_path"]],
                   check=True, capture_output=True, timeout=120)
    img = np.asarray(Image.open(shot).convert("RGB")).astype(int)
    # The charts draw coloured polylines: count strongly coloured pixels
    # (text is black/grey, the page white), in the page and per chart band.
    colour = (img.max(axis=2) - img.min(axis=2)) > 80
    assert colour.sum() > 5000, "the report rendered no coloured chart lines"
    with open(r["report_path"]) as f:
        html = f.read()
    charts = html.count("<svg")
    assert charts >= 6
    assert "http://" not in html.replace("http://www.w3.org/2000/svg", "")  # self-contained
    rows_with_colour = np.nonzero(colour.any(axis=1))[0]
    assert rows_with_colour.max() - rows_with_colour.min() > 1000  # lines in charts all down the page


def test_profile_measures_wait_and_step():
    import time

    import stoker

    def slow_batches():
        for i in range(5):
            time.sleep(0.02)
            yield np.zeros((4, 3)), np.zeros(4)

    p = stoker.profile(slow_batches())
    for _ in p:
        time.sleep(0.01)
    s = p.stats()
    assert s["batches"] == 5 and s["samples"] == 20
    # What was measured is consistent; how long it took is not asserted.
    assert s["wait_s"] > 0 and s["step_s"] > 0
    assert abs(s["wait_share"] - s["wait_s"] / (s["wait_s"] + s["step_s"])) < 1e-9


def test_trace_has_stage_wait_and_step_spans(scenario_data, tmp_path):
    trace = tmp_path / "trace.json"
    env = dict(os.environ, PYTHONPATH=PYTHONPATH, STOKER_TRACE=str(trace))
    subprocess.run([sys.executable, SCENARIOS, "decode", str(scenario_data / "small"), "--seconds", "1"], env=env,
                   check=True, capture_output=True, timeout=120)
    with open(trace) as f:
        events = json.load(f)["traceEvents"]
    names = {e["name"] for e in events}
    assert {"read", "decode", "transform", "wait for batch", "training step"} <= names
    spans = [e for e in events if e["ph"] == "X"]
    assert all(e["dur"] >= 0 and e["ts"] > 0 for e in spans)
    workers = {e["tid"] for e in spans if e["name"] == "decode"}
    assert len(workers) >= 1
    # Every span of a worker thread is one sample stage: none overlap on one thread.
    for tid in workers:
        s = sorted((e["ts"], e["ts"] + e["dur"]) for e in spans if e["tid"] == tid)
        assert all(a[1] <= b[0] + 1e-3 for a, b in zip(s, s[1:]))


def test_stats_per_thread_add_up(photos):
    import stoker
    loader = stoker.Loader(photos, batch_size=4, threads=2, transforms=[stoker.RandomResizedCrop(32)])
    for _ in loader:
        pass
    s = loader.stats()
    assert len(s["per_thread"]) == 2
    assert sum(t["samples"] for t in s["per_thread"]) == s["samples"]
    assert abs(sum(t["decode_s"] for t in s["per_thread"]) - s["decode_s"]) < 1e-6
    assert 0 < s["consumer_wait_s"] <= s["consumer_active_s"]


def _doctor(tmp, script, *extra):
    """`stoker doctor` on a Python script written to tmp; its CompletedProcess and JSON report (None if none)."""
    path = os.path.join(tmp, "script.py")
    with open(path, "w") as f:
        f.write(script)
    report, js = os.path.join(tmp, "r.html"), os.path.join(tmp, "r.json")
    env = dict(os.environ, PYTHONPATH=PYTHONPATH)
    p = subprocess.run([CLI, "doctor", "-q", "--report", report, "--json", js, *extra, "--", sys.executable, path],
                       env=env, capture_output=True, text=True, timeout=300)
    result = None
    if os.path.exists(js):
        with open(js) as f:
            result = json.load(f)
    return p, result, report


def test_a_failed_command_gets_no_verdict(tmp_path):
    p, r, report = _doctor(tmp_path, (
        "import sys, time\n"
        "print('loading the data set', file=sys.stderr, flush=True)\n"
        "time.sleep(0.3)\n"
        "raise KeyError('label')\n"))
    assert p.returncode == 1, p.stdout + p.stderr  # the command's exit code
    assert "loading the data set" in p.stderr  # its stderr passed through as it ran
    assert "VERDICT: none: the command failed (exit 1) after " in p.stdout and ": no verdict" in p.stdout
    assert "compute-bound" not in p.stdout and "input-bound" not in p.stdout
    assert "KeyError: 'label'" in p.stdout  # the last lines of its stderr
    assert r["verdict"] is None and r["failed"] is True and r["exit_code"] == 1
    assert r["stderr_tail"][-1] == "KeyError: 'label'"
    assert not r.get("suggestions")
    assert os.path.exists(report)
    with open(report) as f:
        html = f.read()
    assert "no verdict: the command failed (exit 1)" in html and "KeyError: 'label'" in html


NO_WORKERS = """
import time
import torch
from torch.utils.data import DataLoader, Dataset

class Busy(Dataset):  # loading on the loop's own thread: 4 ms of CPU per sample
    def __len__(self):
        return 64
    def __getitem__(self, i):
        end = time.process_time() + 0.004
        while time.process_time() < end:
            pass
        return torch.zeros(3), i

loader = DataLoader(Busy(), batch_size=8, num_workers=0)
start = time.monotonic()
while time.monotonic() - start < 3:
    for x, y in loader:
        time.sleep(0.002)  # a short step
"""


def test_cpu_attribution_without_workers(tmp_path):
    p, r, _ = _doctor(tmp_path, NO_WORKERS)
    assert p.returncode == 0, p.stdout + p.stderr
    assert r["verdict"].startswith("input-bound"), p.stdout
    ev = "\n".join(r["evidence"])
    assert "num_workers=0" in ev and "no worker processes" in ev
    assert "worker processes used" not in ev and "PIL" not in ev and "1 workers" not in ev
    assert set(r["cpu"]) == {"main_process", "main_thread", "child_processes", "other_processes"}
    assert r["loop"]["iterations"] >= 1 and r["loop"]["setup_s"] >= 0
    assert any("between epochs" in e for e in r["evidence"])
    label = [s["label"] for s in r["sources"].values()]
    line = NO_WORKERS.splitlines().index("    for x, y in loader:") + 1  # the loop that iterates it
    assert label == [f"DataLoader in <module> (script.py:{line})"], label
