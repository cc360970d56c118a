"""One namespace of tool names shared by core tools, plugins and external servers.

fastmcp only warns on a duplicate name and keeps the first tool; here a duplicate is an error
that names both sides, so an operator knows exactly which two extensions disagree.
"""

import re

from .errors import ExtensionError

TOOL_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,128}$")


class ToolNames:
    def __init__(self, core_names):
        self.owners: dict[str, str] = {name: "a core tool" for name in core_names}

    def check(self, names: list[str], owner: str) -> None:
        """Raise ExtensionError if any of `names` is invalid, repeated, or already taken."""
        problems = []
        seen = set()
        for name in names:
            if not TOOL_NAME.match(name):
                problems.append(f"tool name {name!r} is not valid (letters, digits, _ . - only, at most 128)")
            elif name in seen:
                problems.append(f"tool '{name}' is registered twice by {owner}")
            elif name in self.owners:
                problems.append(f"tool '{name}' of {owner} collides with '{name}' of {self.owners[name]}")
            seen.add(name)
        if problems:
            raise ExtensionError("; ".join(problems))

    def claim(self, names: list[str], owner: str) -> None:
        self.check(names, owner)
        for name in names:
            self.owners[name] = owner
