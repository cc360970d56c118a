"""Argument types shared by the tools that are no operation (search_items, save_search ...): the
core's (`operations/params.py`: the search arguments, the `search` object, the asset reference,
`json_text`, the one way a parameter declares an array or object), so every tool describes them
alike, and briefly: every tool's schema is sent to the model each session."""

from ...operations.params import (
    AssetArg,
    CatalogArg,
    CollectionIdArg,
    CollectionsArg,
    DatetimeArg,
    DryRunArg,
    FilterArg,
    FilterLangArg,
    HrefArg,
    IdsArg,
    ItemIdArg,
    MaxCloudArg,
    QueryArg,
    SearchArg,
    SearchOrItemsArg,
    SortbyArg,
    json_text,
    search_kwargs,
)

__all__ = [
    "AssetArg",
    "CatalogArg",
    "CollectionIdArg",
    "CollectionsArg",
    "DatetimeArg",
    "DryRunArg",
    "FilterArg",
    "FilterLangArg",
    "HrefArg",
    "IdsArg",
    "ItemIdArg",
    "MaxCloudArg",
    "QueryArg",
    "SearchArg",
    "SearchOrItemsArg",
    "SortbyArg",
    "json_text",
    "search_kwargs",
]
