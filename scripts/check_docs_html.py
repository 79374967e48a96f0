#!/usr/bin/env python3
"""Checks a built docs site (make docs) needs no network to view: no page loads a script, stylesheet,
font or image from http(s) or a protocol-relative URL, and the pages a reader starts from are there.

    python3 scripts/check_docs_html.py build/docs/html
"""
import glob
import os
import re
import sys

REMOTE = re.compile(r"""<(?:script|link|img|iframe|source)\b[^>]*\b(?:src|href)\s*=\s*["'](?:https?:)?//""", re.I)
CSS_REMOTE = re.compile(r"""(?:url\(\s*["']?|@import\s+["'])(?:https?:)?//""", re.I)
REQUIRED = ["index.html", "search.html", "searchindex.js", "getting-started.html", "api/loader.html", "cli.html",
            "cpp-api.html", "doctor.html", "benchmarks.html"]


def main(site):
    problems = [f"missing: {p}" for p in REQUIRED if not os.path.exists(os.path.join(site, p))]
    for path in glob.glob(os.path.join(site, "**", "*"), recursive=True):
        if path.endswith((".html", ".css", ".js")) and os.path.isfile(path):
            with open(path, encoding="utf-8", errors="replace") as f:
                text = f.read()
            pattern = REMOTE if path.endswith(".html") else CSS_REMOTE
            for m in pattern.finditer(text):
                problems.append(f"{os.path.relpath(path, site)}: loads from the network: {m.group(0)[:120]}")
    if problems:
        sys.exit("check_docs_html: " + "\n  ".join(problems))
    pages = len(glob.glob(os.path.join(site, "**", "*.html"), recursive=True))
    print(f"check_docs_html: {pages} pages under {site}, nothing loaded from the network")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "build/docs/html")
