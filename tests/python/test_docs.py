"""The docs site (docs/, `make docs`) cannot rot, checked without building the HTML:

- every public Python name has an autodoc directive on an API page (docs/api/*.rst): the names of
  stoker.__all__, every other public class or function the stoker package exports from its own modules
  (stoker.InterpolationMode, ...), and stoker.datasets' own;
  and every autodoc directive names an object that exists;
- every public header (include/stoker/*.h) is on the C++ API page, every CLI subcommand on the CLI page;
- every relative link of a Markdown page points at a file that exists;
- the guides' code runs: each page's ```python and ```sh blocks, in order, over a small sample set
  (tests/python/docs_blocks.py; a block after `% not run: REASON` is skipped, with its reason in the page);
  README.md's too (its reasons are `<!-- not run: REASON -->` lines);
- README.md is a front door: under 12 KB, and its relative links (and docs/README.md's) resolve;

`make docs` builds the site with warnings as errors (and scripts/check_docs_html.py checks it needs no
network); that check of the build is not part of `make test`.
"""
import glob
import importlib
import inspect
import os
import re
import subprocess
import sys

import pytest

import stoker
import docs_blocks

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DOCS = os.path.join(ROOT, "docs")
BUILD = os.environ.get("STOKER_BUILD", os.path.join(ROOT, "build"))
CLI = os.path.join(BUILD, "tools", "stoker")
README = os.path.join(ROOT, "README.md")
AUTODOC = re.compile(r"^\.\.\s+auto(class|function|data|exception|method|attribute|module)::\s+(\S+)", re.M)


def _defined_in_stoker(obj):
    return (inspect.isclass(obj) or inspect.isfunction(obj) or inspect.isbuiltin(obj)) and \
        (getattr(obj, "__module__", "") or "").startswith("stoker")


def public_names():
    """Dotted names of every public Python object of the package."""
    names = {f"stoker.{n}" for n in stoker.__all__}
    for n in dir(stoker):
        if not n.startswith("_") and _defined_in_stoker(getattr(stoker, n)):
            names.add(f"stoker.{n}")
    datasets = importlib.import_module("stoker.datasets")
    for n, obj in vars(datasets).items():
        if not n.startswith("_") and _defined_in_stoker(obj) and obj.__module__ == "stoker.datasets":
            names.add(f"stoker.datasets.{n}")
    return names


def documented_names():
    """{dotted name: page} of every autodoc directive of docs/api/*.rst."""
    out = {}
    for page in sorted(glob.glob(os.path.join(DOCS, "api", "*.rst"))):
        with open(page, encoding="utf-8") as f:
            for _, name in AUTODOC.findall(f.read()):
                out[name] = os.path.relpath(page, ROOT)
    return out


def test_every_public_name_has_a_page():
    documented = documented_names()
    missing = sorted(public_names() - set(documented))
    assert not missing, (f"public names without an API page (add an autoclass/autofunction directive to a "
                         f"docs/api/*.rst page): {missing}")


def test_every_documented_name_exists():
    bad = []
    for name, page in documented_names().items():
        mod, _, attr = name.rpartition(".")
        try:
            obj = importlib.import_module(mod)
            getattr(obj, attr)
        except (ImportError, AttributeError):
            try:
                importlib.import_module(name)
            except ImportError:
                bad.append(f"{page}: {name}")
    assert not bad, f"API pages document names that do not exist: {bad}"


def test_the_api_pages_are_in_the_toctree():
    with open(os.path.join(DOCS, "api", "index.rst"), encoding="utf-8") as f:
        index = f.read()
    pages = [os.path.splitext(os.path.basename(p))[0] for p in glob.glob(os.path.join(DOCS, "api", "*.rst"))]
    missing = [p for p in pages if p != "index" and not re.search(rf"^\s+{re.escape(p)}\s*$", index, re.M)]
    assert not missing, f"docs/api/index.rst's toctree lacks {missing}"


def test_every_public_header_is_on_the_cpp_page():
    with open(os.path.join(DOCS, "cpp-api.rst"), encoding="utf-8") as f:
        page = f.read()
    on_page = set(re.findall(r"^\.\.\s+doxygenfile::\s+(\S+)", page, re.M))
    headers = {os.path.basename(h) for h in glob.glob(os.path.join(ROOT, "include", "stoker", "*.h"))}
    assert headers - on_page == set(), f"headers without a section on docs/cpp-api.rst: {sorted(headers - on_page)}"
    assert on_page - headers == set(), f"docs/cpp-api.rst names headers that do not exist: {sorted(on_page - headers)}"


def test_doxygen_filter_keeps_the_contract_comments():
    """The headers' // comments become Doxygen's ///, ///< and @file forms; code and line count otherwise kept."""
    sys.path.insert(0, os.path.join(DOCS, "_ext"))
    import doxygen_filter
    src = ["// File comment.", "//", "//   Example code;", "#pragma once", "", "// Brief of f.",
           "int f(int x);  // trailing", "               // its continuation",
           "struct S {", "  int a = 0;  // a's <name> and root/**/x", "};", 'const char* u = "http://x";']
    out = doxygen_filter.filter_lines(src)
    assert out[:6] == ["/// @file", "/// File comment.", "/// ", "/// @code{.cpp}", "///   Example code;",
                       "/// @endcode"]
    assert "/// Brief of f." in out
    assert "int f(int x);  ///< trailing" in out
    assert "               ///< its continuation" in out
    assert r"  int a = 0;  ///< a's \<name\> and root/\**/x" in out
    assert out[-1] == 'const char* u = "http://x";'


@pytest.mark.skipif(not os.path.exists(CLI), reason="CLI not built")
def test_every_cli_subcommand_is_on_the_cli_page():
    sys.path.insert(0, os.path.join(DOCS, "_ext"))
    import stoker_docs
    subs = stoker_docs.subcommands(stoker_docs.cli_help(CLI))
    assert "pack" in subs and "doctor" in subs, subs
    with open(os.path.join(DOCS, "cli.rst"), encoding="utf-8") as f:
        on_page = set(re.findall(r"^\.\.[ \t]+stoker-cli-help::[ \t]*(\S*)[ \t]*$", f.read(), re.M))
    missing = sorted(set(subs) - on_page)
    assert not missing, f"CLI subcommands without a section on docs/cli.rst: {missing}"
    assert "" in on_page, "docs/cli.rst lacks the top-level `stoker --help`"


def _pages():
    """The site's Markdown pages (docs/README*.md are about the folder, not pages of the site)."""
    return sorted(p for p in glob.glob(os.path.join(DOCS, "**", "*.md"), recursive=True)
                  if not os.path.basename(p).startswith("README"))


LINK = re.compile(r"\]\(([^)\s]+)\)")


def _broken_links(page, anchors=False):
    """The relative links of a Markdown file that point at no file (with anchors=True, also those whose
    #anchor names no heading of the Markdown page they point at, as GitHub makes heading anchors)."""
    with open(page, encoding="utf-8") as f:
        text = f.read()
    bad = []
    for target in LINK.findall(text):
        if re.match(r"^[a-z]+:", target):
            continue
        path, _, anchor = target.partition("#")
        dest = os.path.normpath(os.path.join(os.path.dirname(page), path)) if path else page
        if not os.path.exists(dest):
            bad.append(f"{os.path.relpath(page, ROOT)}: {target}")
        elif anchors and anchor and dest.endswith(".md") and anchor not in _heading_anchors(dest):
            bad.append(f"{os.path.relpath(page, ROOT)}: {target} (no heading #{anchor} in {path or 'the page'})")
    return bad


def _heading_anchors(md):
    """GitHub's (and MyST's, myst_heading_anchors) anchors of a Markdown file's headings."""
    with open(md, encoding="utf-8") as f:
        text = re.sub(r"^(```|~~~).*?^\1", "", f.read(), flags=re.M | re.S)  # headings, not code comments
    out = set()
    for title in re.findall(r"^#{1,6}\s+(.+?)\s*$", text, re.M):
        slug = re.sub(r"[^\w\- ]", "", title.strip().lower()).replace(" ", "-")
        out.add(slug)
    return out


def test_relative_links_point_at_files():
    bad = [b for page in _pages() for b in _broken_links(page)]
    assert not bad, f"links to files that do not exist: {bad}"


def test_readme_is_a_front_door():
    """README.md stays a front door (issue 37): under 12 KB, everything else on the site; its relative links
    (into docs/, which GitHub renders too) and docs/README.md's resolve, anchors included."""
    size = os.path.getsize(README)
    assert size < 12 * 1024, (f"README.md is {size} bytes: keep it under 12 KB (what stoker is, one table, install, "
                              f"the two commands, a quick start, links); move the rest to a page of docs/")
    bad = _broken_links(README, anchors=True) + _broken_links(os.path.join(DOCS, "README.md"), anchors=True)
    assert not bad, f"README links that resolve to nothing: {bad}"
    with open(README, encoding="utf-8") as f:
        text = f.read()
    assert "make demo" in text and "make test" in text and "make docs" in text
    assert "](docs/" in text, "README.md links into the site's pages"


GUIDES = [p for p in _pages() + [README] if docs_blocks.runnable(p)]


@pytest.fixture(scope="module")
def docs_cwd(tmp_path_factory):
    """A folder laid out as the repository's root for the guides: data/sample (a small sample set: 4 classes x
    32 real photographs, by the same generator), the repository's scripts, bench, examples and tests, and on
    PATH `stoker` (the built CLI) and `python3` (this interpreter)."""
    top = tmp_path_factory.mktemp("docs")
    os.makedirs(top / "data")
    subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "make_sample_dataset.py"), "--out",
                    str(top / "data" / "sample"), "--per-class", "32", "--classes", "4", "--seed", "7"], check=True,
                   stdout=subprocess.DEVNULL)
    for d in ("scripts", "bench", "examples", "tests", "python"):
        os.symlink(os.path.join(ROOT, d), top / d)
    bin_dir = top / ".bin"
    os.makedirs(bin_dir)
    os.symlink(sys.executable, bin_dir / "python3")
    if os.path.exists(CLI):
        os.symlink(os.path.abspath(CLI), bin_dir / "stoker")
    return str(top)


@pytest.mark.parametrize("page", GUIDES, ids=[os.path.relpath(p, DOCS if p != README else ROOT) for p in GUIDES])
def test_guide_code_runs(page, docs_cwd):
    if not os.path.exists(CLI):
        pytest.skip("CLI not built")
    env = dict(os.environ)
    env["PATH"] = os.path.join(docs_cwd, ".bin") + os.pathsep + env.get("PATH", "")
    env["PYTHONPATH"] = os.pathsep.join([os.environ.get("STOKER_PYTHONPATH", os.path.join(ROOT, "python")),
                                         env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env.setdefault("OMP_NUM_THREADS", "1")
    res = subprocess.run([sys.executable, os.path.join(ROOT, "tests", "python", "docs_blocks.py"), page],
                         cwd=docs_cwd, env=env, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, (f"{os.path.relpath(page, ROOT)}: a code block failed\n"
                                 f"{res.stdout[-3000:]}\n{res.stderr[-5000:]}")
