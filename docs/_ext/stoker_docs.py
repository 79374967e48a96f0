"""Sphinx extension of stoker's docs: runs Doxygen over the public headers
before reading (breathe renders its XML); the ``stoker-cli-help`` directive,
which shows the CLI's own --help output at build time; and a docstring pass
that reads stoker's plain-text docstrings as their authors wrote them (a `*`
in "s3://b/*.tar" is not emphasis, a list after a line of text needs no blank
line, a "Raised by:" section is a list), before napoleon reads their
Google-style sections."""
import os
import re
import subprocess

from docutils import nodes
from docutils.parsers.rst import Directive, directives

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def cli_help(cli, subcommand=None):
    """`stoker [SUB] --help`, with the binary's path shown as `stoker`."""
    args = [cli] + ([subcommand] if subcommand else []) + ["--help"]
    out = subprocess.run(args, capture_output=True, text=True, timeout=60)
    if out.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} exited {out.returncode}: {out.stderr.strip()}")
    return out.stdout.replace(cli, "stoker").rstrip() + "\n"


def subcommands(top_help):
    """The subcommand names listed under "Subcommands:" of `stoker --help`."""
    names, inside = [], False
    for line in top_help.splitlines():
        if line.strip() == "Subcommands:":
            inside = True
            continue
        if inside:
            m = re.match(r"^  (\S+)\s", line)
            if m:
                names.append(m.group(1))
            elif line.strip() and not line.startswith("   "):
                inside = False
    return names


class CliHelp(Directive):
    """.. stoker-cli-help:: [SUBCOMMAND]  -- the literal --help text."""
    optional_arguments = 1
    has_content = False

    def run(self):
        env = self.state.document.settings.env
        cli = env.config.stoker_cli
        if not os.access(cli, os.X_OK):
            raise self.error(f"stoker-cli-help: {cli} is not built (make build, or set STOKER_BUILD)")
        env.note_dependency(cli)
        text = cli_help(cli, self.arguments[0] if self.arguments else None)
        block = nodes.literal_block(text, text)
        block["language"] = "text"
        return [block]


def _literal_spans(line):
    """[(start, end)] of the ``literal`` spans of a line."""
    return [(m.start(), m.end()) for m in re.finditer(r"``.+?``", line)]


def _escape_stars(line):
    spans = _literal_spans(line)
    out = []
    for i, c in enumerate(line):
        if c == "*" and not any(a <= i < b for a, b in spans) and (i == 0 or line[i - 1] != "\\"):
            out.append("\\*")
        else:
            out.append(c)
    return "".join(out)


def _indent(line):
    return len(line) - len(line.lstrip())


BULLET = re.compile(r"^\s*- ")


def plain_docstring(lines):
    """stoker's docstring conventions as reST, in place (see the module's docstring)."""
    out = []
    literal_at = None   # indentation of the line that opened a :: literal block
    list_indent = None  # indentation of the bullets of the list being read
    raised_by = None    # indentation of a "Raised by:" section's entries
    for line in lines:
        blank = not line.strip()
        ind = _indent(line)
        if literal_at is not None and (blank or ind > literal_at):
            out.append(line)
            continue
        literal_at = None
        if raised_by is not None:
            if blank:
                raised_by = None
            elif ind == raised_by:
                line = " " * ind + "- " + line.strip()
            elif ind > raised_by:
                line = " " * (raised_by + 2) + line.strip()
            else:
                raised_by = None
        if line.strip() == "Raised by:":
            out += [line.replace("Raised by:", "**Raised by:**"), ""]
            raised_by = ind + 4
            continue
        stripped = line.lstrip()
        if not (stripped.startswith(">>>") or stripped.startswith("...")):
            line = _escape_stars(line)
        if BULLET.match(line):
            if list_indent is None and out and out[-1].strip():
                out.append("")
            list_indent = ind
        elif list_indent is not None and not blank and ind <= list_indent:
            out.append("")
            list_indent = None
        elif blank:
            list_indent = None
        out.append(line)
        if line.rstrip().endswith("::"):
            literal_at = ind
    return out


def _process_docstring(app, what, name, obj, options, lines):
    lines[:] = plain_docstring(lines)


def run_doxygen(app):
    out = app.config.stoker_doxygen_out
    os.makedirs(out, exist_ok=True)
    env = dict(os.environ, DOXYGEN_OUT=out)
    res = subprocess.run(["doxygen", os.path.join("docs", "Doxyfile")], cwd=ROOT, env=env, capture_output=True,
                         text=True)
    if res.returncode != 0:
        raise RuntimeError(f"doxygen failed ({res.returncode}): {res.stderr[-2000:]}")
    for line in res.stderr.splitlines():
        if "warning" in line:
            from sphinx.util import logging
            logging.getLogger(__name__).warning(f"doxygen: {line}")


def setup(app):
    app.add_config_value("stoker_cli", "", "env")
    app.add_config_value("stoker_doxygen_out", "", "env")
    app.add_directive("stoker-cli-help", CliHelp)
    app.connect("builder-inited", run_doxygen)
    app.connect("autodoc-process-docstring", _process_docstring, priority=400)
    return {"version": "1", "parallel_read_safe": True}
