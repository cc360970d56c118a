"""Keep an external server's secrets out of what we log, raise and show: the one rule of
`catalogs.redact` (URLs, secret-looking pairs and tokens), its configured env values, the values
its command line passes after secret flags (`argv_secrets`), and any long random-looking string
(a child's stderr is not ours: a bare token there has no name to recognise it by)."""

import re

from ...catalogs.redact import MASK, SECRET_WORD, masked

_SECRET_FLAG = re.compile(rf"(?i)--?[\w.-]*{SECRET_WORD}[\w.-]*")
_RANDOM_RUN = re.compile(r"(?<![\w/.-])[A-Za-z0-9_+=-]{24,}(?![\w/.-])")


def _looks_random(run: str) -> bool:
    return any(c.isdigit() for c in run) and any(c.isalpha() for c in run)


def redact(text: str, secrets=()) -> str:
    """`text` with every known secret value (of 4 characters or more) and token-like part masked."""
    text = masked(text, secrets=secrets)
    return _RANDOM_RUN.sub(lambda m: MASK if _looks_random(m.group(0)) else m.group(0), text)


def argv_secrets(argv: list[str]) -> list[str]:
    """The values a command line passes as secrets: the argument after a secret flag
    (`--token abc`) and the value of `--token=abc`, so that a child printing its own argv
    (in a crash report, say) has them masked in its stderr tail too."""
    found = []
    for flag, value in zip(["", *argv], argv, strict=False):
        if _SECRET_FLAG.fullmatch(flag):
            found.append(value)
        name, eq, rest = value.partition("=")
        if eq and _SECRET_FLAG.fullmatch(name):
            found.append(rest)
    return found


def redact_argv(argv: list[str], secrets=()) -> str:
    """A command line for logs and list_extensions, with secrets masked."""
    hidden = [*secrets, *argv_secrets(argv)]
    shown = []
    for flag, arg in zip(["", *argv], argv, strict=False):
        shown.append(MASK if _SECRET_FLAG.fullmatch(flag) else redact(arg, hidden))
    return " ".join(_quote(arg) for arg in shown)


def _quote(arg: str) -> str:
    import shlex

    return arg if re.fullmatch(r"[\w@%+=:,./*-]+", arg) else shlex.quote(arg)
