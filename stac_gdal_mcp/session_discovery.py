"""Session's discovery methods (a mixin of `Session`, its first base): the configured catalogs,
their collections and queryables, item search (one catalog or several), one item, and a whole
search saved as a stac-geoparquet output. The examples run as `Session`'s do (the sample
catalog, `session` and `aoi` as in session.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel

from .discovery.query import ItemSearch
from .errors import InvalidArgument

if TYPE_CHECKING:
    from .core import Core
    from .models import CatalogInfo, CollectionDetail, CollectionList, Queryables
    from .outputs import OutputRecord
    from .processing.jobs import Job
    from .results import SearchResults
    from .settings import Settings


def declared_by(model: type[BaseModel], *, leave_out: tuple[str, ...] = ()):
    """`@declared_by(Model)`: a method `fn(self, *, <its own keywords>, **arguments)` that also
    takes the fields of `model` (declared there once; but those in `leave_out`): its signature
    lists each with its type and default (help, tab completion), its help each with its
    description, and a name that is none of them is refused with the nearest ones ("did you
    mean")."""
    import functools
    import inspect

    from .operations.base import unknown_names

    fields = {n: f for n, f in model.model_fields.items() if n not in leave_out}
    P = inspect.Parameter

    def decorate(fn):
        own = [p for p in inspect.signature(fn).parameters.values() if p.kind is P.KEYWORD_ONLY]
        known = (*fields, *(p.name for p in own))

        @functools.wraps(fn)
        def method(self, **arguments: Any):
            unknown = [name for name in arguments if name not in known]
            if unknown:
                raise InvalidArgument(unknown_names(unknown, known))
            return fn(self, **arguments)

        parameters = [P("self", P.POSITIONAL_OR_KEYWORD)]
        parameters += [
            P(n, P.KEYWORD_ONLY, default=f.default, annotation=f.annotation) for n, f in fields.items()
        ]
        method.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
            parameters + own, return_annotation=fn.__annotations__.get("return", inspect.Signature.empty)
        )
        described = [f"    {n}: {f.description} (default {f.default!r})" for n, f in fields.items()]
        method.__doc__ = "\n".join([inspect.getdoc(fn) or "", "", "Parameters:", *described])
        return method

    return decorate


class Discovery:
    """Find imagery: `catalogs`, `collections`, `collection`, `collection_json`, `queryables`,
    `search`, `get_item`, `save_search` (the methods of `Session` that read catalogs)."""

    core: Core
    settings: Settings

    def catalogs(self, check_reachable: bool = False) -> list[CatalogInfo]:
        """The configured catalogs: id, title, url or path, kind; with `check_reachable`, whether
        each answers and which search features it supports (a request to each remote one).

        >>> [c.id for c in session.catalogs()][:4]
        ['earth-search', 'planetary-computer', 'usgs-landsat', 'sample']
        """
        return self.core.catalogs.info(check_reachable=check_reachable)

    def collections(
        self,
        catalog: str | None = None,
        *,
        q: str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> CollectionList:
        """One page of a catalog's collections (id, title, short description, extent, license,
        asset keys); `q`: free-text words; `cursor`: the `next_cursor` of the previous page.

        >>> [c.id for c in session.collections().collections]
        ['sentinel-2-l2a', 'landsat-c2-l2']
        """
        from .discovery.collections import list_collections

        return list_collections(self.core, catalog, q, limit, cursor)

    def collection(self, collection_id: str, catalog: str | None = None) -> CollectionDetail:
        """One collection: extent, summaries, item_assets (roles, band common names, gsd),
        providers, license, links.

        >>> sorted(session.collection("sentinel-2-l2a").item_assets)[:3]
        ['blue', 'green', 'nir']
        """
        from .discovery.collections import get_collection

        return get_collection(self.core, collection_id, catalog)

    def collection_json(self, collection_id: str, catalog: str | None = None) -> dict[str, Any]:
        """A collection's full STAC JSON (a dict; `pystac.Collection.from_dict` makes one of it).

        >>> session.collection_json("sentinel-2-l2a")["type"]
        'Collection'
        """
        from .discovery.collections import get_collection_json

        return get_collection_json(self.core, collection_id, catalog)

    def queryables(self, collection_id: str | None = None, catalog: str | None = None) -> Queryables:
        """Properties usable in `filter` / `query` of a search, with their types.

        >>> "eo:cloud_cover" in [q.name for q in session.queryables("sentinel-2-l2a").queryables]
        True
        """
        from .discovery.collections import get_queryables

        return get_queryables(self.core, collection_id, catalog)

    @declared_by(ItemSearch)
    def search(self, **arguments: Any) -> SearchResults:
        """Search a catalog for items (the arguments of STAC API item search, as the server's
        search_items tool takes them). A condition the catalog cannot take is translated or applied
        here, and `notes` says so. `fields` (STAC fields extension, e.g. ["id", "datetime"] or
        ["-links"]): the parts of full items, or the summary keys, wanted; detail="count": only
        `matched`, exact (`page.matched_is` says how it was counted). Several catalogs (a list, comma-separated ids, "*": all) give
        one merged, de-duplicated page (copies in `also_in`, counts per catalog in `catalogs`). Returns one page (`limit` items, default limits.page_size):
        iterate it, `to_dataframe()` it, `next()` for the following page.

        >>> results = session.search(collections=["sentinel-2-l2a"], bbox=[13.55, 45.85, 13.75, 45.98],
        ...                          max_cloud_cover=30, sortby="-datetime", limit=2)
        >>> results.ids, results.matched
        (['S2A_33TUL_20240808_0_L2A', 'S2B_33TUL_20240714_0_L2A'], 3)
        >>> results.next().ids
        ['S2A_33TUL_20240619_0_L2A']
        >>> results.to_dataframe()[["id", "cloud_cover"]].to_dict("records")[0]
        {'id': 'S2A_33TUL_20240808_0_L2A', 'cloud_cover': 5.0}
        """
        from .discovery.sources import open_source
        from .results import SearchResults

        request = ItemSearch.of(**arguments)  # its values checked once, by the catalog's source
        page = open_source(self.core, request.catalog, several=True).search(request)  # one, or several
        return SearchResults(page, self, request)

    def get_item(self, collection_id: str, item_id: str, catalog: str | None = None) -> dict[str, Any]:
        """The full STAC item (a GeoJSON Feature dict), asset hrefs signed where the catalog
        needs it. (`pystac.Item.from_dict(item)` makes a pystac Item of it.)

        >>> item = session.get_item("sentinel-2-l2a", "S2A_33TUL_20240808_0_L2A")
        >>> item["properties"]["eo:cloud_cover"], "red" in item["assets"]
        (5.0, True)
        """
        from .discovery.collections import get_item

        return get_item(self.core, collection_id, item_id, catalog)

    @declared_by(ItemSearch, leave_out=("limit", "cursor", "detail"))
    def save_search(
        self,
        *,
        format: Literal["geoparquet", "ndjson"] = "geoparquet",
        max_items: int | None = None,
        output_name: str | None = None,
        job: Job | None = None,
        partition_by: Sequence[str] | str | None = None,
        **search: Any,
    ) -> OutputRecord:
        """Every item a search finds (the arguments of `search`; up to `max_items`, default
        limits.max_items), full, written into the workspace as a stac-geoparquet file (or
        format="ndjson": one item per line) with a record; asset hrefs as the catalog gives them,
        unsigned. The file reads back as a catalog (`[[catalogs]] path = ...`), with
        stac-geoparquet, rustac or DuckDB. (`SearchResults.to_geoparquet(path)` writes anywhere.)
        `partition_by` (any of "collection", "year", "month"): a folder of hive folders instead,
        rows sorted by datetime. limits.max_output_bytes holds while writing.

        >>> record = session.save_search(collections=["sentinel-2-l2a"], bbox=aoi, max_cloud_cover=30)
        >>> record.properties.title, record.assets["data"].type
        ('3 items of a search of sample', 'application/vnd.apache.parquet')
        """
        from .discovery.fields import saved_fields

        fields = saved_fields(search.pop("fields", None))
        results = self.search(**search, detail="full", limit=self.settings.limits.max_items, fields=fields)
        return results.save(
            format, max_items=max_items, output_name=output_name, job=job, partition_by=partition_by
        )
