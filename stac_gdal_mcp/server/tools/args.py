"""Argument types shared by the tools that are no operation (search_items, save_search ...): the
core's (`discovery/arguments.py`: the search arguments and `json_text`, the one way a parameter
declares an array or object; `operations/params.py`: the `search` object, the asset reference), so every tool describes them
alike, and briefly: every tool's schema is sent to the model each session."""

from ...discovery.arguments import (
    CatalogArg,
    CollectionsArg,
    DatetimeArg,
    FieldsArg,
    FilterArg,
    FilterLangArg,
    IdsArg,
    MaxCloudArg,
    QueryArg,
    SortbyArg,
    json_text,
)
from ...operations.params import (
    AssetArg,
    CollectionIdArg,
    DryRunArg,
    HrefArg,
    ItemIdArg,
    SearchArg,
    SearchOrItemsArg,
    search_kwargs,
)

__all__ = [
    "AssetArg",
    "CatalogArg",
    "CollectionIdArg",
    "CollectionsArg",
    "DatetimeArg",
    "DryRunArg",
    "FieldsArg",
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
