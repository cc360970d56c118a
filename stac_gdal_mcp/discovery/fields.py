"""The STAC API fields extension: which parts of an item an answer carries.

    fields=["id", "datetime"]            # only these (and what names the item: id, collection)
    fields=["-links", "-assets"]         # everything but these
    fields={"include": [...], "exclude": [...]}

A name without a dot that is not a top-level item key (`id`, `bbox`, `assets`, ...) is a
property: `datetime` is `properties.datetime`, `eo:cloud_cover` is `properties.eo:cloud_cover`.
Catalogs that conform to the extension are sent the fields (`as_api`); for the others (local
catalogs, stac-geoparquet, APIs without it) `apply_fields` does the same here, after the search.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..catalogs.bounds import ID_CHARS
from ..catalogs.security import shown
from ..errors import InvalidArgument

MAX_FIELDS = 50  # names in one `fields`
TOP_LEVEL = ("type", "stac_version", "stac_extensions", "id", "collection", "geometry", "bbox")
TOP_LEVEL += ("properties", "assets", "links")
ALWAYS = ("id", "collection")  # an answer always names its items


@dataclass(frozen=True)
class Fields:
    """Checked fields: dotted paths to include (none: all) and to exclude."""

    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = field(default=())

    def as_api(self) -> dict[str, list[str]]:
        """The `fields` member of a POST search body (what a conforming API is sent)."""
        include = list(dict.fromkeys([*ALWAYS, *self.include])) if self.include else []
        return {"include": include, "exclude": list(self.exclude)}


def path_of(name: str) -> str:
    """The dotted item path a field name means (`datetime` -> `properties.datetime`)."""
    head = name.split(".", 1)[0]
    return name if head in TOP_LEVEL else f"properties.{name}"


def parse_fields(value: Any) -> Fields | None:
    """`fields` as a list of names (`-name`: exclude), a comma-separated string, or
    {"include": [...], "exclude": [...]}; None when not given. Bad input: one clear error."""
    if value is None or isinstance(value, Fields):
        return value
    if isinstance(value, str):
        value = [part.strip() for part in value.split(",") if part.strip()]
    if isinstance(value, dict):
        unknown = set(value) - {"include", "exclude"}
        if unknown:
            raise InvalidArgument("fields as an object has only 'include' and 'exclude' lists")
        names = [*_names(value.get("include") or []), *(f"-{n}" for n in _names(value.get("exclude") or []))]
    else:
        names = _names(value)
    if len(names) > MAX_FIELDS:
        raise InvalidArgument(f"fields names at most {MAX_FIELDS} fields (got {len(names)})")
    include = tuple(dict.fromkeys(path_of(n) for n in names if not n.startswith("-")))
    # an item keeps what names it (id, collection) whatever is excluded: "-id" is not sent on
    exclude = tuple(
        dict.fromkeys(p for n in names if n.startswith("-") if not _within(p := path_of(n[1:]), ALWAYS))
    )
    if not include and not exclude:
        return None
    return Fields(include=include, exclude=exclude)


#: What every saved item keeps, whatever `fields` includes: a file of items must read back as items.
SAVED_ALWAYS = ("type", "stac_version", "geometry", "bbox", "properties.datetime")


def saved_fields(value: Any) -> Fields | None:
    """`fields` of a saved search: as `parse_fields`, an include list also keeping SAVED_ALWAYS
    (and what a stac-geoparquet file needs: each item's type, geometry and datetime)."""
    fields = parse_fields(value)
    if fields is None:
        return fields
    for path in fields.exclude:
        if _within(path, SAVED_ALWAYS) or any(kept.startswith(path + ".") for kept in SAVED_ALWAYS):
            raise InvalidArgument(
                f"fields: a saved item keeps {', '.join(SAVED_ALWAYS)} (a file of items must read "
                f"back as items): '-{path}' cannot leave them out"
            )
    if not fields.include:
        return fields
    return Fields(tuple(dict.fromkeys([*SAVED_ALWAYS, *fields.include])), fields.exclude)


def _within(path: str, kept: tuple[str, ...]) -> bool:
    """`path` is one of `kept` or inside one of them (`geometry.coordinates` is in `geometry`)."""
    return any(path == k or path.startswith(k + ".") for k in kept)


def _names(value: Any) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(n, str) for n in value):
        raise InvalidArgument(
            'fields must be a list of field names such as ["id", "datetime"] ("-name" leaves one out)'
        )
    for name in value:
        bare = name.removeprefix("-").removeprefix("+")
        if not bare or len(bare) > ID_CHARS or any(ord(c) < 32 for c in bare) or ".." in bare:
            raise InvalidArgument(f"fields: {shown(name, ID_CHARS)} is not a field name")
    return [name.removeprefix("+") for name in value]


def apply_fields(item: dict, fields: Fields | None) -> dict:
    """`item` with only the included paths (and its id and collection), less the excluded ones:
    what a conforming API would have sent."""
    if fields is None:
        return item
    if fields.include:
        out: dict = {}
        for path in (*ALWAYS, *fields.include):
            _copy(item, out, path.split("."))
    else:
        out = _deep_copy(item)
    for path in fields.exclude:
        _drop(out, path.split("."))
    return out


def _copy(source: dict, target: dict, keys: list[str]) -> None:
    head, rest = keys[0], keys[1:]
    if not isinstance(source, dict) or head not in source:
        return
    if not rest:
        target[head] = _deep_copy(source[head])
        return
    if isinstance(source[head], dict):
        _copy(source[head], target.setdefault(head, {}), rest)


def _drop(target: dict, keys: list[str]) -> None:
    head, rest = keys[0], keys[1:]
    if not isinstance(target, dict) or head not in target:
        return
    if not rest:
        del target[head]
    else:
        _drop(target[head], rest)


def _deep_copy(value):
    if isinstance(value, dict):
        return {k: _deep_copy(v) for k, v in value.items()}
    return value
