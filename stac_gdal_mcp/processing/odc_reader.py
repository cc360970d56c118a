"""The reader every odc-stac load here runs (`reader_driver`): odc-stac's rasterio reader with two
additions, in each dask task that reads a file (on threads or on a cluster's workers):

- hrefs that need a signature (Planetary Computer SAS tokens, `signing.py`) are signed at read
  time, and a read refused with HTTP 403 is retried once with a renewed token;
- a failed read carries GDAL's own words about it as notes on its exception. rasterio raises from
  the last GDAL error it saw ("got 0 bytes, expected 1854"), which alone reads like a connection
  closed early; GDAL said before that the server answered HTTP 500, or that the request timed
  out. `dask_runtime` reads the notes to name the reason (`gdal_messages.diagnose`).
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..settings import Settings

NOTE = "GDAL: "  # the prefix of the notes a failed read carries


def reader_driver(settings: Settings, items: list[dict] | None = None):
    """The odc-stac reader driver of a load of `items`: it signs the hrefs that need it (only
    the signers that apply to `items`' hrefs travel with it) and reports GDAL's words."""
    from ..catalogs.signing import signers

    found = signers(settings)
    if items is not None:
        hrefs = [a.get("href") for i in items for a in (i.get("assets") or {}).values()]
        found = [s for s in found if any(isinstance(h, str) and s.applies(h) for h in hrefs)]
    return _driver(tuple(found))


def gdal_notes(exc: BaseException) -> list[str]:
    """The GDAL messages a failed read attached to `exc` (see the module docstring)."""
    return [
        n[len(NOTE) :] for n in getattr(exc, "__notes__", ()) if isinstance(n, str) and n.startswith(NOTE)
    ]


def _driver(signers_: tuple):
    """A reader driver (module level, so that a pickled driver is rebuilt on a worker)."""
    return _classes()[1](signers_)


_SIGNED_QUERY = re.compile(r"\?[^\s'\"?]*\bsig=[^\s'\",]*")


class _ScrubTokens(logging.Filter):
    """Takes signatures out of odc-stac's log lines (it logs the href of a failed read)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.msg, str):
            record.msg = _SIGNED_QUERY.sub("", record.msg)
        if isinstance(record.args, tuple):
            record.args = tuple(_SIGNED_QUERY.sub("", a) if isinstance(a, str) else a for a in record.args)
        return True


def _note(exc: BaseException, messages: list[str]) -> None:
    for message in messages:
        exc.add_note(NOTE + _SIGNED_QUERY.sub("", message))


@functools.cache
def _classes():
    """The odc-stac driver classes, made on first use (odc-stac is a heavy import); odc-stac's
    reader logs without signatures from then on (here and on every dask worker)."""
    from odc.loader._rio import RioDriver, RioReader, rio_read
    from odc.stac._mdtools import StacAuxReader
    from rasterio.errors import RasterioError

    from ..catalogs.gdal_messages import capture_gdal_messages
    from ..catalogs.signing import is_refused

    logging.getLogger("odc.loader._rio").addFilter(_ScrubTokens())

    class Reader(RioReader):
        """Reads like odc-stac's rasterio reader; signs the href at read time where it must."""

        def __init__(self, src, ctx, signers_):
            super().__init__(src, ctx)
            self._signers = signers_

        def read(self, cfg, dst_geobox, *, dst=None, selection=None):
            signer = next((s for s in self._signers if s.applies(self._src.uri)), None)
            src = self._src
            if signer is not None:
                src = dataclasses.replace(src, uri=signer.sign(src.uri))
            with capture_gdal_messages() as messages:
                try:
                    return rio_read(src, cfg, dst_geobox, dst=dst, selection=selection)
                except RasterioError as exc:
                    if signer is None or not signer.should_renew(src.uri, is_refused(messages, exc)):
                        _note(exc, messages)
                        raise
                    renewed = dataclasses.replace(self._src, uri=signer.renew(src.uri))
                    try:
                        return rio_read(renewed, cfg, dst_geobox, dst=dst, selection=selection)
                    except RasterioError as again:
                        _note(again, messages)
                        raise

    class Driver(RioDriver):
        """odc-stac's rasterio driver whose readers are `Reader`s (picklable)."""

        def __init__(self, signers_: tuple = ()):
            super().__init__(md_parser=None, aux_reader=StacAuxReader())
            self.signers = tuple(signers_)

        def open(self, src, ctx):
            return Reader(src, ctx, self.signers)

        def __reduce__(self):
            return (_driver, (self.signers,))

    return Reader, Driver
