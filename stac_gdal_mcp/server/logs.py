"""The server's log: every line on stderr in one format, whoever writes it."""

import logging
import sys

FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def setup_logging(level: str) -> None:
    """One stderr handler, one format, at `level`, for our loggers, fastmcp's and the MCP SDK's;
    every line through the one masking rule (catalogs/redact.py).

    fastmcp installs its own (rich) handlers on the `fastmcp` logger at import and stops its
    records from reaching the root logger; its lines then come out in a second format, wrapped
    over several lines. Here its handlers are removed and its records go through ours (fastmcp
    is imported first, so that its import-time set-up cannot come after this one).
    """
    import fastmcp  # noqa: F401  (configures its logger on import)

    from ..catalogs.redact import MaskingFilter, mask_library_logs

    mask_library_logs()
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter(FORMAT))
    handler.addFilter(MaskingFilter())  # whoever logs a URL or a secret: masked
    root = logging.getLogger()
    for old in root.handlers[:]:
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper())
    theirs = logging.getLogger("fastmcp")
    for old in theirs.handlers[:]:
        theirs.removeHandler(old)
    theirs.propagate = True
    theirs.setLevel(logging.NOTSET)
