"""Naming an input, one way for every processing tool, resolved in one place.

An input is either an `href` (http(s)://, s3://, or a path inside the workspace or a local
catalog's folder) or `collection_id` + `item_id` + `asset` (+ `catalog`). `asset` may be an
asset key (any case) or a band common name (`red`, `nir`, `scl`), so that Earth Search
(`red`, `scl`) and Planetary Computer (`B04`, `SCL`) items answer to the same words.

Resolving (`resolve_input`, `asset_source`) applies the href policy of `security.py` to every
href, including those found in catalog items, signs through the catalog, and gives GDAL a path
(`/vsicurl/...`, `/vsis3/...` or a local path). `open_raster` opens it under the GDAL
environment tuned for cloud reads (`gdal_env`), allowing only plain raster formats (no VRT or
other formats that could point GDAL at further files or hosts).
"""

from __future__ import annotations

import contextlib
import logging
import re
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, urlencode, urljoin, urlsplit, urlunsplit

from ..catalogs.gdal_messages import ReadFailure, capture_gdal_messages, diagnose
from ..catalogs.netguard import gdal_proxy_env
from ..catalogs.security import check_local_path, check_url, network_policy
from ..errors import AssetNotFound, AssetUnreadable, InvalidArgument, LimitExceeded, ProcessingFailed
from ..stac import band_common_names, item_datetime, link_href

if TYPE_CHECKING:
    from ..core import Core
    from ..outputs import SourceRef
    from ..settings import Settings

log = logging.getLogger(__name__)

# Raster formats GDAL may open for an input. Formats that reference other files or hosts
# (VRT, GDAL_WMS, ...) are deliberately absent. The first is tried when the name says nothing.
DRIVERS_BY_SUFFIX = {
    ".tif": "GTiff",
    ".tiff": "GTiff",
    ".png": "PNG",
    ".jpg": "JPEG",
    ".jpeg": "JPEG",
    ".jp2": "JP2OpenJPEG",
    ".webp": "WEBP",
}
ALLOWED_DRIVERS = ("GTiff", "JP2OpenJPEG", "PNG", "JPEG", "WEBP")

# Other words for the same band across catalogs (Earth Search, Planetary Computer, Landsat C2).
BAND_ALIASES = {
    "coastal": ("B01", "coastal"),
    "blue": ("B02",),
    "green": ("B03",),
    "red": ("B04",),
    "rededge1": ("B05",),
    "rededge2": ("B06",),
    "rededge3": ("B07",),
    "nir": ("B08", "nir08", "B8A"),
    "nir08": ("B8A", "nir"),
    "nir09": ("B09",),
    "swir16": ("B11", "swir1"),
    "swir22": ("B12", "swir2"),
    "scl": ("SCL",),
    "visual": ("TCI",),
}

# Query parameters that carry credentials (Azure SAS, AWS pre-signed URLs, tokens).
_SECRET_PARAMS = re.compile(
    r"^(sv|ss|srt|sp|se|st|spr|sig|sr|si|skoid|sktid|skt|ske|sks|skv|sdd|"
    r"x-amz-[a-z-]+|token|access_token|signature|key|api_key|apikey|expires|policy|key-pair-id)$",
    re.IGNORECASE,
)
_TIFF_TYPES = ("image/tiff", "image/x.geotiff", "application/geotiff")


def find_asset(item: dict, name: str) -> tuple[str, dict]:
    """The (key, asset) of `item` named `name`: asset key (exact, then any case), band common
    name, then the same band's other names in other catalogs (`nir` -> `B08`/`nir08`)."""
    if not name or not isinstance(name, str):
        raise InvalidArgument("asset must be a non-empty asset key or band common name")
    assets = item.get("assets") or {}
    for word in (name, *BAND_ALIASES.get(name.lower(), ())):
        found = _match(assets, word)
        if found:
            return found, assets[found]
    raise AssetNotFound(
        f"item '{item.get('id')}' has no asset or band '{name}'; it has: {describe_assets(assets)}"
    )


def _match(assets: dict, word: str) -> str | None:
    if word in assets:
        return word
    same_key = [k for k in assets if k.lower() == word.lower()]
    if same_key:
        return same_key[0]
    by_band = [k for k, a in assets.items() if word.lower() in (n.lower() for n in band_common_names(a))]
    return min(by_band, key=lambda k: _rank(assets[k]), default=None)


def _rank(asset: dict) -> tuple:
    """Prefer single-band GeoTIFF data assets (`red` over `visual`, then COG over JP2)."""
    media = (asset.get("type") or "").lower()
    return (
        len(band_common_names(asset)) != 1,
        not media.startswith(_TIFF_TYPES),
        "data" not in (asset.get("roles") or []),
    )


def describe_assets(assets: dict) -> str:
    parts = []
    for key, asset in assets.items():
        bands = band_common_names(asset)
        parts.append(f"{key} ({', '.join(bands)})" if bands else key)
    return ", ".join(parts) or "(no assets)"


def unsigned_href(href: str) -> str:
    """`href` without credentials: no user:password, no SAS/pre-signed query parameters."""
    parts = urlsplit(href)
    if not parts.scheme or parts.scheme.lower() not in ("http", "https", "s3"):
        return href
    netloc = parts.netloc.rsplit("@", 1)[-1]
    query = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if not _SECRET_PARAMS.match(k)]
    return urlunsplit((parts.scheme, netloc, parts.path, urlencode(query), ""))


@dataclass(frozen=True)
class AssetSource:
    """One resolved input: what GDAL opens, and where it came from (for records and messages)."""

    gdal_path: str = field(repr=False)  # may carry a signature: never log or return it
    href_unsigned: str
    item: dict | None = field(default=None, repr=False, compare=False)
    asset_key: str | None = None
    catalog: str | None = None
    collection_id: str | None = None
    item_id: str | None = None
    requester_pays: bool = False
    # signs the href at read time (a catalog with signing, see signing.py); None: gdal_path as is
    signer: Any = field(default=None, repr=False, compare=False)

    def signed_path(self) -> str:
        """The path GDAL opens now: `gdal_path`, or for a signing catalog's href the same href
        signed with the token cached for its container (renewed shortly before it expires)."""
        if self.signer is None or not self.gdal_path.startswith("/vsicurl/"):
            return self.gdal_path
        return "/vsicurl/" + self.signer.sign(self.gdal_path[len("/vsicurl/") :])

    def renew_signature(self, failed_path: str, failure: ReadFailure) -> bool:
        """After a failed read of `failed_path`: when the server refused its signature (HTTP 403)
        or its token has expired meanwhile, get a new token (one per old token, shared by
        concurrent readers) and say so; False otherwise (not signed, or not the signature)."""
        if self.signer is None or not failed_path.startswith("/vsicurl/"):
            return False
        href = failed_path[len("/vsicurl/") :]
        if not self.signer.should_renew(href, _refused(failure)):
            return False
        self.signer.renew(href)
        return True

    @property
    def asset(self) -> dict:
        return ((self.item or {}).get("assets") or {}).get(self.asset_key or "", {})

    @property
    def datetime(self) -> str | None:
        return item_datetime(self.item or {})

    @property
    def label(self) -> str:
        """Short name for messages and output names: `item_id/asset` or the file name."""
        if self.item_id:
            return f"{self.item_id}/{self.asset_key}"
        return Path(urlsplit(self.href_unsigned).path).name or self.href_unsigned

    @property
    def stem(self) -> str:
        """For output names: `item_id-asset` or the file name without its suffix."""
        if self.item_id:
            return f"{self.item_id}-{self.asset_key}"
        return Path(urlsplit(self.href_unsigned).path).stem or "input"

    @property
    def item_href(self) -> str | None:
        href = link_href(self.item or {}, "self")
        return unsigned_href(href) if href else None

    def source_ref(self) -> SourceRef:
        """The `derived_from` entry of an output made from this input (no credentials)."""
        from ..outputs import SourceRef

        return SourceRef(
            href=self.href_unsigned,
            asset=self.asset_key,
            catalog=self.catalog,
            collection_id=self.collection_id,
            item_id=self.item_id,
            item_href=self.item_href,
            datetime=self.datetime,
        )

    def scrub(self, text: str) -> str:
        """`text` (a GDAL message) with the signed path replaced by the unsigned href."""
        text = text.replace(self.gdal_path, self.href_unsigned)
        if self.signer is not None:  # paths signed at read time carry other tokens
            base = re.escape(self.href_unsigned.split("?", 1)[0])
            text = re.sub(rf"(/vsicurl/)?{base}(\?[^\s'\"]*)?", lambda _: self.href_unsigned, text)
            text = re.sub(r"\?[^\s'\"?]*\bsig=[^\s'\",]*", "", text)  # GDAL quotes file names too
        return text


def local_roots(core: Core) -> list[Path]:
    """Folders whose files may be read as inputs: the workspace and local catalogs' folders."""
    return [Path(core.settings.workspace), *core.catalogs.local_roots()]


def gdal_path_for(href: str, core: Core) -> str:
    """Apply the href policy and return the path GDAL opens (`/vsicurl/`, `/vsis3/` or local)."""
    if not isinstance(href, str) or not href.strip():
        raise InvalidArgument("href must be a non-empty string")
    href = href.strip()
    try:
        scheme = urlsplit(href).scheme.lower()
    except ValueError as exc:  # e.g. "Invalid IPv6 URL": an unclosed [ in the host
        raise InvalidArgument(f"href is not a valid URL ({exc})") from None
    if len(scheme) <= 1:  # a local path (a one-letter "scheme" is a Windows drive)
        return str(check_local_path(href, local_roots(core)))
    check_url(href, policy=network_policy(core.settings))  # refuses other schemes
    if scheme == "s3":
        parts = urlsplit(href)
        return f"/vsis3/{parts.netloc}{parts.path}"
    return f"/vsicurl/{href}"


def asset_source(core: Core, item: dict, asset: str, *, catalog: str | None = None) -> AssetSource:
    """Resolve asset `asset` of an already fetched (and signed) `item` of catalog `catalog`."""
    key, meta = find_asset(item, asset)
    href = meta.get("href")
    if not href:
        raise AssetNotFound(f"asset '{key}' of item '{item.get('id')}' has no href")
    self_href = link_href(item, "self")
    if "://" not in href and not href.startswith("/") and self_href:
        href = urljoin(self_href, href)
    config = core.catalogs.get(catalog).config  # the `workspace` catalog too
    from ..catalogs.signing import signer_for

    signer = signer_for(config, core.settings)
    return AssetSource(
        gdal_path=gdal_path_for(href, core),
        href_unsigned=unsigned_href(href),
        item=item,
        asset_key=key,
        catalog=config.id,
        collection_id=item.get("collection"),
        item_id=item.get("id"),
        requester_pays=config.requester_pays,
        signer=signer if signer is not None and signer.applies(href) else None,
    )


def resolve_input(
    core: Core,
    *,
    href: str | None = None,
    collection_id: str | None = None,
    item_id: str | None = None,
    asset: str | None = None,
    catalog: str | None = None,
) -> AssetSource:
    """The one way every processing tool names its input: `href`, or collection/item/asset."""
    by_item = [collection_id, item_id, asset]
    if href is not None and any(v is not None for v in [*by_item, catalog]):
        raise InvalidArgument("give either href or collection_id + item_id + asset (+ catalog), not both")
    if href is not None:
        return AssetSource(gdal_path=gdal_path_for(href, core), href_unsigned=unsigned_href(href.strip()))
    if any(v is None for v in by_item):
        raise InvalidArgument(
            "name the input with href (http(s)://, s3:// or a workspace path), or with "
            "collection_id + item_id + asset (an asset key or a band common name like 'red')"
        )
    from ..discovery.collections import get_item

    item = get_item(core, collection_id, item_id, catalog)
    return asset_source(core, item, asset, catalog=catalog)


def gdal_env(settings: Settings, *, requester_pays: bool = False) -> dict[str, str]:
    """GDAL configuration for reading COGs over HTTP/S3, applied with `rasterio.Env(**env)`."""
    from .._version import __version__

    network = settings.network
    env = {
        "GDAL_DISABLE_READDIR_ON_OPEN": "EMPTY_DIR",  # no directory listing per open
        "GDAL_HTTP_MERGE_CONSECUTIVE_RANGES": "YES",
        "GDAL_HTTP_MULTIRANGE": "YES",  # parallel range requests
        "GDAL_HTTP_MULTIPLEX": "YES",
        "GDAL_HTTP_MAX_RETRY": str(network.max_retries),
        "GDAL_HTTP_RETRY_DELAY": "0.5",
        "GDAL_HTTP_TIMEOUT": str(max(1, round(network.timeout_s))),
        "GDAL_HTTP_CONNECTTIMEOUT": str(max(1, round(min(network.timeout_s, 10)))),
        "GDAL_HTTP_USERAGENT": f"stac-gdal-mcp/{__version__}",
        # No per-file VSI_CACHE on top of the /vsicurl/ cache below: it reads in 32 KB blocks, so
        # opening a COG fetched 32 KB where GDAL's own first chunk (16 KB) holds the header and
        # the IFDs of a usual COG; measured: 1.57x -> 1.33x the touched tiles' bytes for a
        # time series of a small AOI (bench_timeseries_scale.py), same number of requests.
        "VSI_CACHE": "FALSE",
        "CPL_VSIL_CURL_CACHE_SIZE": str(128 * 1024**2),  # all /vsicurl/ files of the process
        "GDAL_PAM_ENABLED": "NO",  # never write .aux.xml sidecars
        # One thread per read: GDAL 3.10's multi-threaded GeoTIFF reading fetches tiles through
        # a path that neither retries nor reports a failed range request (uncompressed tiles
        # silently become zeros) and keeps the bad blocks in its cache. See docs/reliability.md.
        "GDAL_NUM_THREADS": "1",
    }
    if requester_pays:
        env["AWS_REQUEST_PAYER"] = "requester"  # needs AWS credentials in GDAL's usual places
    else:
        env["AWS_NO_SIGN_REQUEST"] = "YES"  # public buckets (Earth Search's COGs)
    env.update(gdal_proxy_env(settings))  # every connection, redirects too, checked (netguard.py)
    return env


# For a read that runs in one of many concurrent threads (one item each): GDAL's own
# multi-threaded tile reading (its global pool, sized to the CPU count) would funnel every
# item's HTTP reads through that pool. (Now the default of gdal_env too; kept for callers.)
ONE_THREAD_PER_READ = {"GDAL_NUM_THREADS": "1"}


def gdal_message(exc: BaseException, source: AssetSource | None = None) -> str:
    text = " ".join(str(exc).split())
    return source.scrub(text) if source else text


def suffix_driver(href: str) -> str | None:
    """The GDAL driver the file name of `href` says (None when it says nothing known)."""
    return DRIVERS_BY_SUFFIX.get(Path(urlsplit(href).path).suffix.lower())


@contextlib.contextmanager
def open_raster(
    source: AssetSource,
    settings: Settings,
    *,
    overview_level: int | None = None,
    env: dict[str, str] | None = None,
) -> Iterator:
    """Open `source` for reading under `gdal_env`; yields a rasterio dataset.

    Reads must happen inside the block (the GDAL environment is scoped to it).
    `overview_level`: open that overview (0 = the first reduced level) as if it were the dataset.
    `env`: GDAL options merged over `gdal_env` (e.g. `ONE_THREAD_PER_READ`).
    """
    import rasterio
    from rasterio.errors import RasterioError

    first = suffix_driver(source.href_unsigned)
    drivers = [first] if first else list(ALLOWED_DRIVERS)
    with rasterio.Env(**{**gdal_env(settings, requester_pays=source.requester_pays), **(env or {})}):
        src, errors = None, []
        path, renewed = source.signed_path(), False
        for driver in drivers:
            while True:
                with capture_gdal_messages() as messages:
                    try:
                        # (passing overview_level=None would hide the overviews: only pass a level)
                        extra = {} if overview_level is None else {"overview_level": overview_level}
                        src = rasterio.open(path, driver=driver, **extra)
                        break
                    except RasterioError as exc:
                        errors.append(gdal_message(exc, source))
                        failure = diagnose(messages, exc, settings)
                if not renewed and source.renew_signature(path, failure):  # an expired token
                    path, renewed = source.signed_path(), True
                    continue
                break
            if src is not None:
                break
            if is_transfer_failure(failure):
                raise read_failed(source, failure, "opening")
            if "not recognized as being in a supported file format" not in errors[-1]:
                break
        if src is None:
            raise AssetUnreadable(_open_failure(source, errors[-1]))
        with src:
            yield src


def _refused(failure: ReadFailure) -> bool:
    """HTTP 403: for a signed href, an expired (or revoked) signature."""
    return failure.reason.startswith("the server answered HTTP 403")


def is_transfer_failure(failure: ReadFailure) -> bool:
    """A failure of the HTTP transfer itself (status, timeout, short answer), not of the file."""
    return failure.retryable or failure.reason.startswith(("the server", "the connection"))


def _open_failure(source: AssetSource, message: str) -> str:
    if "not recognized as being in a supported file format" in message:
        return (
            f"{source.href_unsigned} is not a raster this server reads "
            f"(allowed formats: {', '.join(ALLOWED_DRIVERS)}; VRT and other indirect formats are refused)"
        )
    if "404" in message or "No such file" in message or "does not exist" in message:
        return f"{source.href_unsigned} was not found ({message})"
    return f"cannot open {source.href_unsigned}: {message}"


def check_read_size(pixels: float, settings: Settings, *, what: str, hint: str) -> None:
    """Refuse an operation that would read more than limits.max_read_pixels source pixels (from
    the overview level it uses), before any pixel is read: a small header may claim a huge raster."""
    limit = settings.limits.max_read_pixels
    if pixels > limit:
        raise LimitExceeded(
            f"{what} would read about {pixels:,.0f} source pixels, more than limits.max_read_pixels={limit:,}; {hint}"
        )


# --- failed reads are errors, never pixels --------------------------------------------------------
#
# GDAL reports why an HTTP read failed (status code, timeout, short body) as CPLE warnings that
# rasterio logs on "rasterio._err", and then fails the read with a generic message ("IReadBlock
# failed ..."). `capture_gdal_messages` collects those warnings for the current thread, so the
# error can say what really happened; `Reader` retries what GDAL itself does not retry (a body
# cut short) on a freshly opened dataset (GDAL may keep a failed block in its cache).

# (`capture_gdal_messages`, `diagnose` and `ReadFailure` live in `gdal_messages`.)


def describe_source(source: AssetSource) -> str:
    """'asset 'red' of item 'X' (href)' or the href: for messages."""
    if source.item_id:
        return f"asset '{source.asset_key}' of item '{source.item_id}' ({source.href_unsigned})"
    return source.href_unsigned


def read_failed(source: AssetSource, failure: ReadFailure, doing: str = "reading") -> AssetUnreadable:
    return AssetUnreadable(f"{doing} {describe_source(source)} failed: {source.scrub(failure.reason)}")


class Reader:
    """An open input whose reads fail loudly: `reader.run(fn)` calls `fn(dataset)`; a GDAL failure
    becomes AssetUnreadable naming the asset and the reason, after up to `network.max_retries`
    further attempts on a freshly opened dataset for failures GDAL did not retry itself (a body cut
    short; a multi-range request). `reader.src` is the open dataset (for header facts)."""

    def __init__(self, source: AssetSource, settings: Settings, *, overview_level=None, env=None, job=None):
        self.source, self.settings, self.job = source, settings, job
        self._open_args = {"overview_level": overview_level, "env": env}
        self._stack = contextlib.ExitStack()
        self.src = None

    def __enter__(self) -> Reader:
        self._open()
        return self

    def __exit__(self, *exc) -> None:
        self._stack.close()

    def _open(self) -> None:
        self._stack.close()
        self._stack = contextlib.ExitStack()
        self.src = self._stack.enter_context(open_raster(self.source, self.settings, **self._open_args))

    def run(self, fn, doing: str = "reading"):
        from rasterio._err import CPLE_BaseError
        from rasterio.errors import RasterioError

        attempts = 1 + max(0, int(self.settings.network.max_retries))
        attempt, renewed = 0, False
        while True:
            with capture_gdal_messages() as messages:
                try:
                    return fn(self.src)
                except (RasterioError, CPLE_BaseError) as exc:
                    failure = diagnose(messages, exc, self.settings)
            path = self.src.name
            if not renewed and self.source.renew_signature(path, failure):
                # the signature expired during the job: a new token, once, on a fresh dataset
                log.info(
                    "%s %s: signature refused or expired, signing it again", doing, self.source.href_unsigned
                )
                renewed = True
                self._open()
                continue
            log.warning("%s %s failed: %s", doing, self.source.href_unsigned, failure.reason)
            if not failure.retryable or attempt == attempts - 1:
                raise read_failed(self.source, failure, doing) from None
            delay = min(0.5 * 2**attempt, 4.0)
            attempt += 1
            if self.job is not None:
                self.job.sleep(delay)
            else:
                time.sleep(delay)
            # a fresh dataset and no cached bytes: GDAL may keep the block or the short answer
            from .gdal_calls import forget_remote_file

            self._stack.close()
            forget_remote_file(path)
            self._open()


@contextlib.contextmanager
def open_reader(
    source: AssetSource, settings: Settings, *, overview_level=None, env=None, job=None
) -> Iterator[Reader]:
    """`open_raster`, with reads through `Reader.run` (see Reader)."""
    with Reader(source, settings, overview_level=overview_level, env=env, job=job) as reader:
        yield reader


# --- many files at once, on long-lived threads ----------------------------------------------------

_READERS: dict[int, ThreadPoolExecutor] = {}
_READERS_LOCK = threading.Lock()


def reader_threads(size: int) -> ThreadPoolExecutor:
    """The process's pool of `size` threads for reading many files at once (one item each).

    Long-lived on purpose: GDAL keeps state per thread that is slow to build - the first dataset
    a new thread opens costs ~20 ms of CPU more (its PROJ context and database), and its HTTP
    connections are per thread - so a call that started threads of its own paid that for each
    thread on every call, and more threads cost more (measured: 24 items at 50 ms per request,
    one call 0.56 -> 0.32 s with 24 threads; each one-item call ~25 ms less)."""
    with _READERS_LOCK:
        pool = _READERS.get(size)
        if pool is None:
            pool = _READERS[size] = ThreadPoolExecutor(max_workers=size, thread_name_prefix=f"reader{size}")
        return pool


def read_each(fn: Callable, args: Iterable[tuple], workers: int) -> Iterator[tuple[int, Any]]:
    """`fn(*a)` for each `a` of `args` on `reader_threads(workers)`, at most `workers` of this call
    at a time (calls running at the same moment share the threads in turn); yields
    (index, result) as they complete. If the caller stops early (an exception, a closed
    generator), the calls not started are dropped and the ones running are waited for, so
    nothing of it runs after the generator ends."""
    pool = reader_threads(workers)
    pending = iter(enumerate(args))
    running: dict[Future, int] = {}
    try:
        while True:
            while len(running) < workers:
                nxt = next(pending, None)
                if nxt is None:
                    break
                running[pool.submit(fn, *nxt[1])] = nxt[0]
            if not running:
                return
            done, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in done:
                yield running.pop(future), future.result()
    finally:
        for future in running:
            future.cancel()
        wait(running)


@contextlib.contextmanager
def gdal_errors(source: AssetSource, doing: str) -> Iterator[None]:
    """Turn a GDAL/rasterio failure inside the block into an error naming the source and the
    reason (AssetUnreadable when a read of the source failed, else ProcessingFailed)."""
    from rasterio._err import CPLE_BaseError
    from rasterio.errors import RasterioError

    with capture_gdal_messages() as messages:
        try:
            yield
        except (RasterioError, CPLE_BaseError) as exc:
            failure = diagnose(messages, exc)
            if is_transfer_failure(failure):
                raise read_failed(source, failure, doing) from None
            raise ProcessingFailed(
                f"{doing} {source.href_unsigned} failed: {gdal_message(exc, source)}"
            ) from None
