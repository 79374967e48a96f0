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
- a real browser opens the built site (Debian's chromium, headless and offline, scripts/docs_browser.py):
  the index and a guide render with the theme's layout, and the search page finds results offline.
  The site is build/docs/html when `make docs` built it after the last change to its sources, else it is
  built into a temp dir here (about 20 s).

`make docs` builds the site with warnings as errors (and scripts/check_docs_html.py checks it needs no
network); that check of the build is not part of `make test`.
"""
import glob
import html.parser
import importlib
import importlib.util
import inspect
import os
import re
import shutil
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
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import docs_browser  # noqa: E402
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


# --- A real browser on the built site (issue 37 item 6) ---------------------------------------------------

# What the site is built from: a built site older than any of these is rebuilt (into a temp dir) for the test.
SITE_SOURCES = ["docs/**/*", "CHANGELOG.md", "python/stoker/**/*.py", "python/stoker/**/*.pyi",
                "include/stoker/*.h", "src/*/README.md", "tools/doctor/README.md"]


def _newest_source():
    newest = 0.0
    for pattern in SITE_SOURCES:
        for path in glob.glob(os.path.join(ROOT, pattern), recursive=True):
            rel = os.path.relpath(path, DOCS)
            if os.path.isfile(path) and not rel.startswith(("screenshots", "README")):
                newest = max(newest, os.path.getmtime(path))
    return newest


def _missing_site_tools():
    missing = [m for m in ("sphinx", "myst_parser", "breathe", "furo")
               if importlib.util.find_spec(m) is None]
    if shutil.which("doxygen") is None:
        missing.append("doxygen")
    return missing


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """The built site's folder: STOKER_DOCS_HTML, else build/docs/html when `make docs` built it after the last
    change to its sources, else a fresh build into a temp dir (the same Sphinx build as `make docs`)."""
    if docs_browser.chromium() is None:
        pytest.skip("chromium is not installed (scripts/install-deps.sh installs Debian's chromium)")
    if os.environ.get("STOKER_DOCS_HTML"):
        return os.environ["STOKER_DOCS_HTML"]
    built = os.path.join(BUILD, "docs", "html")
    index = os.path.join(built, "index.html")
    if os.path.exists(index) and os.path.getmtime(index) >= _newest_source():
        return built
    missing = _missing_site_tools()
    if missing:
        pytest.skip(f"the site is not built and cannot be: {missing} missing (scripts/install-deps.sh installs "
                    f"python3-sphinx python3-myst-parser python3-breathe furo doxygen)")
    if not os.path.exists(CLI):
        pytest.skip("CLI not built (the CLI reference runs its --help)")
    out = tmp_path_factory.mktemp("site")
    env = dict(os.environ, STOKER_BUILD=os.path.abspath(BUILD), STOKER_DOXYGEN_OUT=str(out / "doxygen"))
    env["PYTHONPATH"] = os.pathsep.join([os.environ.get("STOKER_PYTHONPATH", os.path.join(ROOT, "python")),
                                         env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    res = subprocess.run([sys.executable, "-m", "sphinx", "-q", "-b", "html", "-d", str(out / "doctrees"),
                          DOCS, str(out / "html")], cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=900)
    assert res.returncode == 0, f"the docs site did not build:\n{res.stdout[-3000:]}\n{res.stderr[-5000:]}"
    return str(out / "html")


class _Dom(html.parser.HTMLParser):
    """What the checks read of a page's DOM: the <body>'s attributes, the title, the headings' text, and each
    link's href with the classes of the elements around it."""

    VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}

    def __init__(self, text):
        super().__init__()
        self.stack, self.body, self.title, self.headings, self.links, self._text = [], {}, "", [], [], None
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "body":
            self.body = attrs
        if tag == "a" and "href" in attrs:
            around = {c for _, cls in self.stack for c in cls} | set((attrs.get("class") or "").split())
            self.links.append((attrs["href"], around))
        if tag in ("title", "h1", "h2") and self._text is None:
            self._text = (tag, [])
        if tag not in self.VOID:
            self.stack.append((tag, (attrs.get("class") or "").split()))

    def handle_endtag(self, tag):
        if self._text and self._text[0] == tag:
            text = "".join(self._text[1]).strip().rstrip("¶#").strip()
            if tag == "title":
                self.title = self.title or text
            else:
                self.headings.append((tag, text))
            self._text = None
        while self.stack:
            if self.stack.pop()[0] == tag:
                break

    def handle_data(self, data):
        if self._text:
            self._text[1].append(data)

    def hrefs(self, within):
        """The links inside an element of class WITHIN."""
        return [href for href, around in self.links if within in around]


def _open(site, page, budget_ms=5000):
    return _Dom(docs_browser.dump_dom(docs_browser.page_url(site, page), budget_ms=budget_ms))


def test_browser_renders_the_index(site, tmp_path):
    dom = _open(site, "index.html")
    # The theme's script ran (it sets the body's data-theme; the HTML file has a bare <body>).
    assert dom.body.get("data-theme") in ("auto", "light", "dark"), dom.body
    assert dom.title.startswith(f"stoker {stoker.__version__}"), dom.title
    assert ("h1", "stoker") in dom.headings, dom.headings
    nav = dom.hrefs("sidebar-tree")
    for page in ["getting-started.html", "guides/classification.html", "guides/segmentation.html",
                 "guides/porting.html", "doctor.html", "api/index.html", "cli.html", "cpp-api.html",
                 "benchmarks.html", "reliability.html", "changelog.html"]:
        assert page in nav, f"the index's navigation lacks {page}: {nav}"
    # The stylesheet applied: the theme's layout puts the navigation in a left sidebar whose background differs
    # from the content's (an unstyled page would be one white column).
    from PIL import Image
    import numpy as np
    shot = docs_browser.screenshot(docs_browser.page_url(site, "index.html"), tmp_path / "index.png", colours=0)
    img = np.asarray(Image.open(shot).convert("RGB")).astype(int)
    row = img[-40]                                      # below the navigation's last entry
    content = row[int(img.shape[1] * 0.75)]
    band = np.nonzero(np.abs(row - content).sum(axis=1) > 0)[0]
    band = band[band < img.shape[1] // 2]
    assert len(band) > img.shape[1] // 8, "no sidebar: the theme's stylesheet did not apply"
    assert (img.max(axis=2) - img.min(axis=2) > 80).sum() > 2000, "no coloured text (links, code) rendered"


def test_browser_renders_a_guide(site):
    dom = _open(site, "guides/segmentation.html")
    assert dom.title.startswith("Segmentation"), dom.title
    assert dom.headings[0] == ("h1", "Segmentation"), dom.headings
    assert ("h2", "Images and masks") in dom.headings, dom.headings
    assert "../index.html" in dom.hrefs("sidebar-tree") or "../index.html" in dom.hrefs("sidebar-brand"), \
        "the guide links back to the index"
    assert "#" in dom.hrefs("current-page"), "the navigation marks the guide as the current page"
    assert "#images-and-masks" in dom.hrefs("toc-tree"), "the guide's table of contents"
    with open(os.path.join(site, "guides", "segmentation.html"), encoding="utf-8") as f:
        assert 'class="highlight-python' in f.read(), "the guide's code blocks are highlighted"


def test_browser_search_works_offline(site):
    """search.html runs Sphinx's search over searchindex.js, a local file: no server and no network (host
    names resolve to nothing in docs_browser)."""
    text = docs_browser.dump_dom(docs_browser.page_url(site, "search.html?q=shuffle_window"), budget_ms=10000)
    dom = _Dom(text)
    results = [href.split("#")[0] for href in dom.hrefs("search")]
    assert "guides/remote.html" in results and "guides/packing.html" in results, results
    assert "Search finished, found" in text, "the search did not finish"
    text = docs_browser.dump_dom(docs_browser.page_url(site, "search.html?q=zzqqxxnotaword"), budget_ms=10000)
    assert not _Dom(text).hrefs("search"), "a word on no page found results"
