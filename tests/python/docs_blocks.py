"""The docs' code blocks, read from their Markdown sources (docs/**/*.md) and run.

A page's ```python and ```sh blocks run in page order, in one process: the
Python blocks share one namespace (a later block uses what an earlier one
made), the shell blocks run with bash -euo pipefail. A block right after a
MyST comment line ``% not run: REASON`` is skipped (multi-GPU, a remote
store, a full build: the reason is shown to the reader too, in the source);
in README.md, which GitHub renders, the line is an HTML comment
``<!-- not run: REASON -->``.

    python3 tests/python/docs_blocks.py PAGE.md   # run in the folder the page's paths are relative to
"""
import re
import subprocess
import sys
import time

RUN_LANGS = {"python", "sh"}
FENCE = re.compile(r"^(?P<fence>`{3,}|~{3,})(?P<info>[^`]*)$")
SKIP = re.compile(r"^(?:%|<!--)\s*not run:\s*(?P<reason>\S.*?)\s*(?:-->)?$")


def blocks(path):
    """[(line, lang, code, skip reason or None)] of every fenced code block of a MyST page (or README.md)."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    out, i, pending_skip = [], 0, None
    while i < len(lines):
        line = lines[i]
        s = SKIP.match(line)
        if s:
            pending_skip = s.group("reason")
            i += 1
            continue
        m = FENCE.match(line)
        if m:
            fence, info = m.group("fence"), m.group("info").strip()
            start = i + 1
            j = start
            while j < len(lines) and not lines[j].startswith(fence):
                j += 1
            lang = info.split()[0] if info else ""
            out.append((start, lang, "\n".join(lines[start:j]) + "\n", pending_skip))
            pending_skip = None
            i = j + 1
            continue
        if line.strip():
            pending_skip = None
        i += 1
    return out


def runnable(path):
    """The blocks of a page that run: [(line, lang, code)]."""
    return [(ln, lang, code) for ln, lang, code, skip in blocks(path) if lang in RUN_LANGS and skip is None]


def main(page):
    ns = {"__name__": "__main__"}
    for line, lang, code in runnable(page):
        t = time.monotonic()
        print(f"--- {page}:{line} ({lang})", flush=True)
        if lang == "python":
            exec(compile(code, f"{page}:{line}", "exec"), ns)
        else:
            res = subprocess.run(["bash", "-euo", "pipefail", "-c", code])
            if res.returncode != 0:
                sys.exit(f"{page}:{line}: the sh block exited {res.returncode}")
        print(f"--- {page}:{line} done in {time.monotonic() - t:.1f} s", flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
