# Sphinx configuration of stoker's documentation: `make docs` -> build/docs/html.
#
# Why these tools (all Debian 12 packages, installed by scripts/install-deps.sh):
# - Sphinx 5.3 (python3-sphinx) with autodoc + napoleon: stoker's docstrings are
#   Google style (Args:/Returns:/Raises:/Example: with >>> lines, as
#   torchvision's), which napoleon renders as parameter lists with types;
#   autodoc takes the signatures from the code itself (the extension module is
#   imported, so pybind11's classes show their real constructors). MkDocs'
#   docstring renderer (mkdocstrings) is not packaged in Debian 12.
# - MyST-Parser 0.18 (python3-myst-parser): the guides are Markdown, so the
#   README's sections move into them as they are; the API pages are reST
#   (autodoc's directives).
# - Doxygen 1.9.4 XML + breathe 4.34 (doxygen, python3-breathe): the C++ API
#   from the public headers' contract comments (through docs/_ext/doxygen_filter.py,
#   since the headers use plain // comments).
# - furo (furo): a clean theme whose CSS, JS and fonts ship in the package
#   (no CDN); the built site needs no network (tests/python/test_docs.py checks
#   that no page loads a script or stylesheet from http(s)).
import os
import sys

DOCS = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(DOCS)
sys.path.insert(0, os.path.join(DOCS, "_ext"))
sys.path.insert(0, os.environ.get("STOKER_PYTHONPATH", os.path.join(ROOT, "python")))

import stoker  # noqa: E402  (the built extension must import: autodoc reads it)

project = "stoker"
author = "the stoker authors"
copyright = "stoker authors"
version = release = stoker.__version__

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "myst_parser",
    "breathe",
    "stoker_docs",
]

source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build", "README.md", "Doxyfile", "screenshots"]
myst_enable_extensions = ["colon_fence"]
myst_heading_anchors = 3

# autodoc: members in source order, signatures from the code; napoleon: Google style.
autodoc_member_order = "bysource"
# Signatures show names and defaults; the types are in the docstrings (napoleon), since the
# annotations of Loader expand its Union aliases into a page-long signature.
autodoc_typehints = "none"
autodoc_default_options = {"members": True}
napoleon_google_docstring = True
napoleon_numpy_docstring = False
napoleon_use_rtype = False
napoleon_use_ivar = True  # "Attributes:" as fields: pybind11 properties get their own entries from :members:
napoleon_attr_annotations = True

# breathe: the XML doxygen writes (stoker_docs runs doxygen before reading).
DOXYGEN_OUT = os.environ.get("STOKER_DOXYGEN_OUT", os.path.join(ROOT, "build", "docs", "doxygen"))
breathe_projects = {"stoker": os.path.join(DOXYGEN_OUT, "xml")}
breathe_default_project = "stoker"
breathe_default_members = ("members", "undoc-members")
breathe_domain_by_extension = {"h": "cpp"}

# The CLI whose --help the CLI reference shows (built by make build).
STOKER_CLI = os.path.join(os.environ.get("STOKER_BUILD", os.path.join(ROOT, "build")), "tools", "stoker")

html_theme = "furo"
html_title = f"stoker {release}"
html_static_path = []
html_show_sourcelink = False
html_copy_source = False
stoker_cli = STOKER_CLI
stoker_doxygen_out = DOXYGEN_OUT
