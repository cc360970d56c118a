"""griffe extension for the Python API page: doctest examples in docstrings become code blocks.

A docstring line starting with `>>>` at the left margin, and the lines after it up to a blank
line, are a doctest block (as in the standard library's doctest). Markdown would read them as a
paragraph — `[c.id for c in ...]` followed by `['sample']` even looks like a reference link —
so they are fenced as `pycon`. Blocks indented by four spaces are already Markdown code and
docstrings with an `Examples:` section are left to the Google-style parser.
"""

from __future__ import annotations

import re

import griffe

_SECTION = re.compile(r"^\s*Examples?:\s*$", re.M)


def fence_doctests(text: str) -> str:
    out: list[str] = []
    in_block = False
    for line in text.split("\n"):
        if not in_block and line.startswith(">>>"):
            out += ["", "```pycon"]
            in_block = True
        elif in_block and not line.strip():
            out.append("```")
            in_block = False
        out.append(line)
    if in_block:
        out.append("```")
    return "\n".join(out)


class DoctestBlocks(griffe.Extension):
    def on_instance(self, *, obj: griffe.Object, **kwargs) -> None:
        docstring = obj.docstring
        if docstring and ">>>" in docstring.value and not _SECTION.search(docstring.value):
            docstring.value = fence_doctests(docstring.value)
