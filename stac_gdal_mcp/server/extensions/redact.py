"""Keep secrets out of what we log, raise and show: configured env values, and anything in a
command line that looks like a token (a value after --token/--api-key/..., a URL password, a
long random-looking string)."""

import re

MASK = "***"
_SECRET_WORD = r"(?:token|secret|passw(?:or)?d|pwd|api[-_]?key|apikey|access[-_]?key|private[-_]?key|auth\w*|credential\w*|bearer)"
# --token abc, --api-key=abc, TOKEN=abc, token: abc
_FLAG_VALUE = re.compile(
    rf"(?i)(\b[\w.-]*{_SECRET_WORD}[\w.-]*\b\s*[=:]\s*|--?[\w.-]*{_SECRET_WORD}[\w.-]*\s+)(\"[^\"]*\"|'[^']*'|\S+)"
)
_BEARER = re.compile(r"(?i)\b(bearer|basic)\s+[\w.~+/=-]+")
_URL_PASSWORD = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://[^/\s:@]+:)[^@\s/]+@")
_KNOWN_TOKEN = re.compile(
    r"\b(?:sk-[A-Za-z0-9_-]{8,}|gh[pousr]_[A-Za-z0-9]{16,}|github_pat_\w{16,}|xox[abpr]-[\w-]{8,}|AKIA[0-9A-Z]{16}|eyJ[\w-]{8,}\.[\w-]{8,}\.[\w-]*)"
)
_RANDOM_RUN = re.compile(r"(?<![\w/.-])[A-Za-z0-9_+=-]{24,}(?![\w/.-])")


def _looks_random(run: str) -> bool:
    return any(c.isdigit() for c in run) and any(c.isalpha() for c in run)


def redact(text: str, secrets=()) -> str:
    """`text` with every known secret value (of 4 characters or more) and token-like part masked."""
    text = str(text)
    for value in sorted({s for s in secrets if s and len(s) >= 4}, key=len, reverse=True):
        text = text.replace(value, MASK)
    text = _BEARER.sub(lambda m: m.group(1) + " " + MASK, text)
    text = _FLAG_VALUE.sub(lambda m: m.group(1) + MASK, text)
    text = _URL_PASSWORD.sub(lambda m: m.group(1) + MASK + "@", text)
    text = _KNOWN_TOKEN.sub(MASK, text)
    return _RANDOM_RUN.sub(lambda m: MASK if _looks_random(m.group(0)) else m.group(0), text)


def redact_argv(argv: list[str], secrets=()) -> str:
    """A command line for logs and list_extensions, with secrets masked."""
    shown = []
    hide_next = False
    for arg in argv:
        if hide_next:
            shown.append(MASK)
            hide_next = False
            continue
        if re.fullmatch(rf"(?i)--?[\w.-]*{_SECRET_WORD}[\w.-]*", arg):
            shown.append(arg)
            hide_next = True
            continue
        shown.append(redact(arg, secrets))
    return " ".join(_quote(arg) for arg in shown)


def _quote(arg: str) -> str:
    import shlex

    return arg if re.fullmatch(r"[\w@%+=:,./*-]+", arg) else shlex.quote(arg)
