"""Items of a zonal statistics call measured on the dask.distributed cluster at
`settings.dask_scheduler` (`Cluster.measure`, in place of `zonal_pixels.measure_assets`)."""

from __future__ import annotations

import logging

from ...errors import StacGdalMcpError
from ...processing.jobs import Job
from .pixels import Call, ItemInputs, failure, measure_assets

log = logging.getLogger(__name__)


class ItemFailed(StacGdalMcpError):
    """An item's failure on a dask worker, in the words the worker gave (see `failure`)."""


class Cluster:
    """Items measured on the dask.distributed cluster at `settings.dask_scheduler`: the client
    resolves each item (catalog, footprint, assets) as here, a worker reads and measures it. The
    zones travel once (scattered to every worker); a worker keeps their projections per call."""

    def __init__(self, core, call: Call):
        import uuid

        from ...processing.dask_runtime import dask_client

        self.client = dask_client(core.settings.dask_scheduler)
        self.key = uuid.uuid4().hex
        self.request = self.client.scatter(call.request, broadcast=True, hash=False)

    def measure(self, settings, call: Call, inputs: list[ItemInputs], indexes: list[int], job: Job):
        """`measure_assets` on a worker; waits for it, checking the job (a stop cancels it)."""
        future = self.client.submit(
            measure_on_worker, settings, self.request, self.key, inputs, indexes, pure=False
        )
        try:
            while True:
                try:
                    frame, error = future.result(timeout=0.2)
                    break
                except TimeoutError:
                    job.check()
        except BaseException:
            future.cancel()
            raise
        if error is not None:
            raise ItemFailed(error)
        return frame

    def close(self) -> None:
        """Let the workers drop the zones."""
        self.request.release()


_WORKER_CALLS: dict[str, Call] = {}


def measure_on_worker(settings, request, key: str, inputs: list[ItemInputs], indexes: list[int]):
    """(rows, None) or (None, the failure in one line) of one item, on a dask worker."""
    call = _WORKER_CALLS.get(key)
    if call is None:  # (one call's zone projections kept per worker process)
        _WORKER_CALLS.clear()
        call = _WORKER_CALLS[key] = Call(request, None, [], [], None, settings.limits)
    try:
        return measure_assets(settings, call, inputs, indexes, Job()), None
    except Exception as exc:
        log.warning(
            "zonal_stats: item %s failed on a dask worker: %s", inputs[0].sources[0].item_id, failure(exc)
        )
        return None, failure(exc)
