"""Running the loads' dask graphs: on dask's local threaded scheduler, or on the
`dask.distributed` cluster at `settings.dask_scheduler` (one client per address, reused),
with progress to a `Job` (which may cancel) and failures as one-line errors without
credentials."""

from __future__ import annotations

import itertools
import logging
import re
import sys
import threading
import time
from typing import Any

from ..errors import AssetUnreadable, OperationCancelled, StacGdalMcpError
from .dask_client import CONNECT_S, bounded, dask_client
from .jobs import Job

log = logging.getLogger(__name__)


def cluster(core, job: Job):
    """The client of `settings.dask_scheduler`, connected (or reused) within the job's time."""
    return dask_client(core.settings.dask_scheduler, job.seconds_left(CONNECT_S))


def on_cluster(core, job: Job, doing: str, fn, *args, **kwargs):
    """A call on the cluster (`bounded`) within what is left of the job's time."""
    deadline = time.monotonic() + job.seconds_left(float(core.settings.limits.job_timeout_s or 3600))
    return bounded(core.settings.dask_scheduler, deadline, doing, fn, *args, **kwargs)


def cancel_later(client, futures) -> None:
    """Cancel `futures` without waiting: a scheduler that stopped answering must not hold the
    caller (the cancel is sent on a thread of its own)."""
    threading.Thread(target=client.cancel, args=(list(futures),), daemon=True, name="dask-cancel").start()


def scheduler_name(core) -> str:
    return (
        f"dask.distributed at {core.settings.dask_scheduler}"
        if core.settings.dask_scheduler
        else "dask threads (local)"
    )


def _no_spurious_rasterio_warning() -> None:
    """odc-stac reads each chunk with `rasterio.warp.reproject` into an array; rasterio gives the
    array a georeferenced in-memory dataset, which it opens before setting its transform and
    hides the resulting NotGeoreferencedWarning with `warnings.catch_warnings()`. That is not
    thread-safe: with several dask threads, one thread's catch_warnings ending restores the
    filters while another thread is inside, and the spurious warning reaches stderr (in some
    runs of the demo). A standing filter for exactly that warning, raised in `rasterio.warp`,
    is not undone that way. Warnings of files that really lack georeferencing are raised
    elsewhere (rasterio.open) and still show."""
    import warnings

    from rasterio.errors import NotGeoreferencedWarning

    warnings.filterwarnings("ignore", category=NotGeoreferencedWarning, module=r"rasterio\.warp\Z")


def compute(core, job: Job, *arrays):
    """Compute dask-backed objects on the configured scheduler, with progress and cancellation."""
    import warnings

    import dask

    _no_spurious_rasterio_warning()
    job.limit_time(core.settings.limits.job_timeout_s)
    try:
        address = core.settings.dask_scheduler
        if address:
            return _compute_distributed(core, cluster(core, job), job, arrays)
        with warnings.catch_warnings():
            # a pixel or a day with no usable value is expected (clouds): it becomes NaN, quietly
            warnings.filterwarnings(
                "ignore", r"All-NaN slice|Mean of empty slice|invalid value", RuntimeWarning
            )
            # the progress callback is this compute's own: entered as a context it would be
            # registered for every dask compute of the process, and another job's (or a
            # notebook's) tasks would report to this job - and be cancelled with it
            return dask.compute(
                *arrays,
                scheduler="threads",
                num_workers=core.settings.limits.max_concurrency,
                callbacks=[_progress(job)],
            )
    except (StacGdalMcpError, OperationCancelled):
        raise
    except Exception as exc:
        log.debug("load failed", exc_info=True)
        raise AssetUnreadable(f"loading the items failed: {_clean(_reason(exc, core.settings))}") from None


def compute_each(core, job: Job, parts: dict[Any, tuple]) -> tuple[dict[Any, tuple], dict[Any, str]]:
    """Compute each part (e.g. one solar day's arrays) on its own: a part whose reads fail is
    left out and reported, never filled with no-data. Returns ({key: computed}, {key: error}).

    odc-stac must load with fail_on_error=True (its default), so that a failed read raises
    here instead of becoming no-data; cancellation and the time limit still stop everything.

    All parts are first computed together, so that the reads of every item overlap (a year of
    a time series is then about as fast as one day); only when that fails are they
    computed one by one, to tell the failing parts from the others."""
    results, failures = {}, {}
    if len(parts) > 1:
        job.check()
        flat = [array for arrays in parts.values() for array in arrays]
        try:
            computed = iter(compute(core, job, *flat))
        except AssetUnreadable as exc:
            log.info("computing %d parts together failed (%s); computing them one by one", len(parts), exc)
        else:
            return {key: tuple(next(computed) for _ in arrays) for key, arrays in parts.items()}, {}
    for key, arrays in parts.items():
        job.check()
        try:
            results[key] = compute(core, job, *arrays)
        except AssetUnreadable as exc:
            log.warning("part %s could not be read: %s", key, exc)
            failures[key] = str(exc).removeprefix("loading the items failed: ")
    return results, failures


class PartFailed(AssetUnreadable):
    """One part of a stream (`compute_stream`) could not be computed; `key` names it."""

    def __init__(self, key, reason: str):
        super().__init__(f"loading the items failed: {reason}")
        self.key, self.reason = key, reason


def compute_stream(core, job: Job, parts, *, ahead: int = 2):
    """Compute `parts` ((key, dask collection), e.g. the tiles of an output, each a small graph of
    its own) `ahead` at a time (on a cluster, at least one per worker thread) on the configured
    scheduler, yielding (key, computed) as each
    finishes (in any order), so that only the parts in flight are in memory, and only their
    results travel back from a cluster.

    A part whose compute fails raises `PartFailed` (its key, GDAL's reason); the parts still in
    flight are then stopped. Cancellation and the time limit stop them too (between dask tasks
    on threads; at once on a cluster), and so does the caller leaving the loop."""
    _no_spurious_rasterio_warning()
    _large_arrays_from_mmap()
    job.limit_time(core.settings.limits.job_timeout_s)
    address = core.settings.dask_scheduler
    if address:
        yield from _stream_distributed(core, cluster(core, job), job, iter(parts), max(1, ahead))
    else:
        yield from _stream_threads(core, job, iter(parts), max(1, ahead))


_MMAP_THRESHOLD = 1024**2
_mmap_set = False


def _large_arrays_from_mmap() -> None:
    """Have glibc give every allocation of 1 MiB or more its own memory map (returned to the
    system when freed). By default its threshold rises after the first large blocks are freed,
    up to 32 MiB, so a stream of 4 MiB day blocks ends up in its heaps, which keep what was
    freed: a 10,000 px composite then held ~400 MB more. Once per process; only glibc."""
    global _mmap_set
    if _mmap_set or not sys.platform.startswith("linux"):
        return
    _mmap_set = True
    import ctypes

    try:
        ctypes.CDLL("libc.so.6").mallopt(-3, _MMAP_THRESHOLD)  # -3: M_MMAP_THRESHOLD
    except (OSError, AttributeError):  # not glibc
        log.debug("mallopt is not available; large arrays stay in the allocator's heaps")


class _Stop(Exception):
    """Raised in a dask callback to end a part's compute once the stream stops."""


def _stream_threads(core, job: Job, parts, ahead: int):
    from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait

    import dask

    stop = threading.Event()

    def check(*_):
        if stop.is_set():
            raise _Stop
        job.check()

    def run(key, collection):
        # the callback is this compute's own (not registered globally): it ends this compute
        # between tasks once the job is cancelled, out of time, or the stream stopped
        try:
            (value,) = dask.compute(
                collection,
                scheduler="threads",
                num_workers=core.settings.limits.max_concurrency,
                callbacks=[_callbacks(pretask=check)],
            )
        except (StacGdalMcpError, OperationCancelled, _Stop):
            raise
        except Exception as exc:
            log.debug("part %s failed", key, exc_info=True)
            raise PartFailed(key, _clean(_reason(exc, core.settings))) from None
        return key, value

    pool = ThreadPoolExecutor(max_workers=ahead, thread_name_prefix="dask-stream")
    running: set = set()
    try:
        while True:
            for key, collection in itertools.islice(parts, ahead - len(running)):
                running.add(pool.submit(run, key, collection))
            if not running:
                return
            done, running = wait(running, timeout=0.2, return_when=FIRST_COMPLETED)
            job.check()
            for future in done:
                yield future.result()
    finally:
        stop.set()
        pool.shutdown(wait=True, cancel_futures=True)


def _stream_distributed(core, client, job: Job, parts, ahead: int):
    # a part per worker thread at least: each thread then has work while a part ends
    ahead = max(ahead, sum(on_cluster(core, job, "counting its threads", client.nthreads).values()))
    running: dict = {}
    try:
        while True:
            for key, collection in itertools.islice(parts, ahead - len(running)):
                running[client.compute(collection)] = key
            if not running:
                return
            done = [future for future in running if future.done()]
            if not done:  # (distributed.wait needs a default client; the session's is not one)
                time.sleep(0.1)
            job.check()
            for future in done:
                key = running.pop(future)
                if future.status == "error":
                    exc = future.exception()
                    log.debug("part %s failed on the cluster: %r", key, exc)
                    raise PartFailed(key, _clean(_reason(exc, core.settings)))
                if future.status == "cancelled":
                    raise PartFailed(key, "its tasks were cancelled on the dask cluster")
                yield key, on_cluster(core, job, "sending a result", future.result, tasks=True)
    finally:
        if running:
            cancel_later(client, running)


def _compute_distributed(core, client, job: Job, arrays):
    futures = client.compute(list(arrays))
    total = len(futures)
    try:
        while True:
            done = sum(f.done() for f in futures)
            job.progress(done, total, "computing on the dask cluster")
            if done == total:
                break
            time.sleep(0.1)
        return on_cluster(core, job, "sending the results", client.gather, futures, tasks=True)
    except BaseException:
        cancel_later(client, futures)
        raise


def _callbacks(start_state=None, pretask=None, posttask=None) -> tuple:
    """Callbacks of dask's local scheduler for one `dask.compute(callbacks=[...])`: its documented
    5-tuple (start, start_state, pretask, posttask, finish), never registered for the process."""
    return (None, start_state, pretask, posttask, None)


def _progress(job: Job) -> tuple:
    """Task counts to `job.progress` (which may cancel), as one compute's callbacks."""
    counts = {"done": 0, "total": 1}

    def start_state(dsk, state):
        counts["total"] = sum(len(state[k]) for k in ("ready", "waiting", "running")) or 1
        counts["done"] = 0

    def posttask(key, result, dsk, state, worker_id):
        counts["done"] += 1
        job.progress(counts["done"], counts["total"], "loading pixels")

    return _callbacks(start_state=start_state, posttask=posttask)


def _reason(exc: BaseException, settings) -> str:
    """Why a load failed, in words: GDAL's messages travel as the exception's causes (rasterio's
    "Read failed. See previous exception" is raised from the CPLE error that says why) and as
    the notes our reader adds (`odc_reader`: what GDAL said before, such as the HTTP status)."""
    from ..catalogs.gdal_messages import diagnose
    from .odc_reader import gdal_notes

    chain, seen = [], exc
    while seen is not None and len(chain) < 10:
        chain.append(seen)
        seen = seen.__cause__ or seen.__context__
    messages = [m for e in chain for m in gdal_notes(e)] + [str(e) for e in chain[1:]]
    if not messages:
        return str(exc)
    return diagnose(messages, exc, settings).reason


def _clean(exc: BaseException | str) -> str:
    """A one-line error without credentials in URLs."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    return re.sub(r"(https?://[^\s?'\"]+)\?[^\s'\"]*", r"\1", text)[:500]
