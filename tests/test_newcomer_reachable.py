"""list_catalogs(check_reachable=true) answers within 4 s whatever the network does: the built-in
public catalogs (unreachable on a machine without internet), a catalog whose server accepts the
connection and never answers, and the pgstac test bed, checked side by side, each within the
reachability timeout, while network.timeout_s is 10 s with 2 retries. The workspace says it is
reachable (it is this server's own folder), not null.
"""

from __future__ import annotations

import socket
import time

from fastmcp import Client
from helpers import scaled


async def test_reachability_is_checked_side_by_side_within_seconds(make_settings, build, pgstac_api):
    with socket.socket() as silent:  # accepts connections (the kernel does), never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        port = silent.getsockname()[1]
        settings = make_settings(
            catalogs=[
                {"id": "bed", "url": pgstac_api.url},
                {"id": "silent", "url": f"http://127.0.0.1:{port}/stac"},
            ],
            default_catalog="bed",
            network={"timeout_s": 10, "max_retries": 2},
        )
        assert {"planetary-computer", "earth-search"} <= {c.id for c in settings.catalogs}
        async with Client(build(settings)) as client:
            started = time.monotonic()
            result = await client.call_tool("list_catalogs", {"check_reachable": True})
            elapsed = time.monotonic() - started
    catalogs = {c["id"]: c for c in result.structured_content["catalogs"]}
    assert elapsed < scaled(4), f"{elapsed:.1f} s"
    assert catalogs["bed"]["reachable"] is True
    assert catalogs["silent"]["reachable"] is False and catalogs["silent"]["error"]
    assert catalogs["workspace"]["reachable"] is True
    assert catalogs["sample"]["reachable"] is True
    assert all(c["reachable"] is not None for c in catalogs.values()), catalogs
