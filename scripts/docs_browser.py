#!/usr/bin/env python3
"""Opens the built docs site (make docs) in Debian's chromium, headless and offline: the DOM of a page after its
scripts ran, and screenshots. tests/python/test_docs.py uses it to check that the index and a guide render and
that the search page finds results offline; run as a script, it makes the screenshots of docs/screenshots/:

    python3 scripts/docs_browser.py build/docs/html docs/screenshots

No CDP and no driver: chromium's own --dump-dom (the serialized DOM once the page and its scripts settled,
within a virtual-time budget) and --screenshot. Each run gets a fresh profile folder, and host names resolve to
nothing, so a page that needed the network would show it (the pages are file:// URLs and need none).
"""
import os
import shutil
import subprocess
import sys
import tempfile

# The screenshots of docs/screenshots/: (file name, page of the site). 1280x1100 px, 256-colour PNGs.
SCREENSHOTS = [("index.png", "index.html"), ("guide-segmentation.png", "guides/segmentation.html")]
WINDOW = (1280, 1100)


def chromium():
    """The chromium binary (Debian's `chromium` package), or None."""
    return shutil.which("chromium") or shutil.which("chromium-browser")


def _run(args, timeout):
    exe = chromium()
    if exe is None:
        raise FileNotFoundError("chromium is not installed (scripts/install-deps.sh installs Debian's chromium)")
    with tempfile.TemporaryDirectory(prefix="stoker-chromium-") as profile:
        cmd = [exe, "--headless", "--disable-gpu", "--no-sandbox", "--hide-scrollbars", "--no-first-run",
               "--disable-background-networking", "--disable-extensions", "--disable-sync",
               f"--user-data-dir={profile}", "--host-resolver-rules=MAP * ~NOTFOUND"] + args
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if res.returncode != 0:
        raise RuntimeError(f"chromium failed (exit {res.returncode}): {' '.join(cmd)}\n{res.stderr[-3000:]}")
    return res.stdout


def page_url(site, page):
    """file:// URL of PAGE ("index.html", "search.html?q=x") of the site in folder SITE."""
    path, sep, query = page.partition("?")
    return "file://" + os.path.abspath(os.path.join(site, path)) + sep + query


def dump_dom(url, budget_ms=5000, timeout=120):
    """The page's DOM, serialized after its scripts ran (up to budget_ms of virtual time)."""
    return _run([f"--virtual-time-budget={budget_ms}", "--dump-dom", url], timeout)


def screenshot(url, out, window=WINDOW, budget_ms=3000, colours=256, timeout=120):
    """A PNG of the page's first window (width x height px) at OUT, reduced to COLOURS colours (small files)."""
    out = os.path.abspath(out)
    _run([f"--window-size={window[0]},{window[1]}", f"--virtual-time-budget={budget_ms}",
          f"--screenshot={out}", url], timeout)
    if not os.path.exists(out):
        raise RuntimeError(f"chromium wrote no screenshot at {out}")
    if colours:
        from PIL import Image
        with Image.open(out) as im:
            small = im.convert("RGB").quantize(colours)
        small.save(out, optimize=True)
    return out


def main(site, out_dir):
    if not os.path.exists(os.path.join(site, "index.html")):
        sys.exit(f"docs_browser: no site at {site} (make docs builds it)")
    os.makedirs(out_dir, exist_ok=True)
    for name, page in SCREENSHOTS:
        path = screenshot(page_url(site, page), os.path.join(out_dir, name))
        print(f"docs_browser: {page} -> {path} ({os.path.getsize(path)} bytes)")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
