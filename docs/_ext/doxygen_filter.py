#!/usr/bin/env python3
"""Doxygen INPUT_FILTER: stoker's public headers document their contracts in
plain `//` comments (include/stoker/*.h); this turns them into Doxygen's forms
without touching the headers (the leading block gains a line or two; every
other line stays where it is):

- a comment block before a declaration: `//` -> `///` (its brief and details);
- a trailing comment after a member (`int x = 0;  // what x is`) -> `///<`,
  and the full-line comments aligned under it (its continuation) -> `///<`;
- the file's leading comment block -> the file's documentation (`/// @file`),
  its indented example lines wrapped in @code ... @endcode;
- `// NOTE:` comments stay plain comments (the headers' inline bodies hold none).
"""
import re
import sys

TRAIL = re.compile(r"^(?P<code>.*?[;,{}]|.*\))(?P<sp>\s+)//(?!/)\s?(?P<text>.*)$")
FULL = re.compile(r"^(?P<ind>\s*)//(?!/)(?P<text>.*)$")


def _esc(text):
    """Comment text as Doxygen reads it literally: <name>, @, \\, & are not its markup."""
    for c in "\\@<>&":
        text = text.replace(c, "\\" + c)
    # "root/<class>/**/<file>": a /* in a line comment would open a C comment for Doxygen
    return text.replace("/*", "/\\*")


def _in_string(code):
    return code.count('"') % 2 == 1


def filter_lines(lines):
    out = []
    i = 0
    n = len(lines)
    # The leading comment block (before #pragma once): the file's documentation.
    head = []
    while i < n and FULL.match(lines[i]):
        head.append(FULL.match(lines[i]).group("text"))
        i += 1
    if head:
        out.append("/// @file")
        in_code = False
        for text in head:
            body = text[1:] if text.startswith(" ") else text
            is_code = body.startswith("  ") and body.strip() != ""
            if is_code and not in_code:
                out.append("/// @code{.cpp}")
                in_code = True
            elif not is_code and in_code:
                out.append("/// @endcode")
                in_code = False
            out.append("/// " + (body if in_code else _esc(body)))
        if in_code:
            out.append("/// @endcode")
    trail_col = None  # the column of the last trailing comment, for its continuation lines
    for line in lines[i:]:
        m = FULL.match(line)
        if m:
            col = len(m.group("ind"))
            if trail_col is not None and col == trail_col:
                out.append(line[:col] + "///<" + _esc(m.group("text")))
                continue
            trail_col = None
            if m.group("text").lstrip().startswith("NOTE"):
                out.append(line)
            else:
                out.append(m.group("ind") + "///" + _esc(m.group("text")))
            continue
        t = TRAIL.match(line)
        if t and not _in_string(t.group("code")):
            code = t.group("code") + t.group("sp")
            trail_col = len(code)
            out.append(code + "///< " + _esc(t.group("text")))
        else:
            trail_col = None
            out.append(line)
    return out


def main():
    with open(sys.argv[1], encoding="utf-8") as f:
        lines = f.read().split("\n")
    sys.stdout.write("\n".join(filter_lines(lines)))


if __name__ == "__main__":
    main()
