"""Canonical collection names that work in every catalog.

The same product has different collection ids in different catalogs: Landsat Collection 2
Level-2 is `landsat-c2-l2` in Earth Search and Planetary Computer and `landsat-c2l2-sr` in USGS
LandsatLook. A canonical name maps to each catalog's id(s); the table is data (`BUILTIN_ALIASES`),
extended and overridden per catalog by the `collection_aliases` setting:

    [collection_aliases.sentinel-2-l2a]
    my-catalog = "s2-l2a"                  # or a list of ids

Rules, for one catalog and one asked name:

- the name is a canonical name with an entry for the catalog -> that catalog's id(s);
- the name is a canonical name, and the catalog appears elsewhere in the table but not under
  this name -> the catalog does not hold that product: the name is left out for it (so
  `sentinel-2-l2a` is never sent to USGS LandsatLook);
- anything else (a catalog the table does not know, a name that is not canonical) -> the name
  as given.

Each mapping that changed a name is reported as a note.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..settings import Settings

# canonical name -> {catalog id: [collection ids in that catalog]}
BUILTIN_ALIASES: dict[str, dict[str, list[str]]] = {
    "sentinel-2-l2a": {
        "earth-search": ["sentinel-2-l2a"],
        "planetary-computer": ["sentinel-2-l2a"],
        "sample": ["sentinel-2-l2a"],
    },
    "landsat-c2-l2": {
        "earth-search": ["landsat-c2-l2"],
        "planetary-computer": ["landsat-c2-l2"],
        "usgs-landsat": ["landsat-c2l2-sr"],
        "sample": ["landsat-c2-l2"],
    },
}


def alias_table(settings: Settings) -> dict[str, dict[str, list[str]]]:
    """The built-in table with the settings' `collection_aliases` merged in (per catalog)."""
    table = {name: {cat: list(ids) for cat, ids in entry.items()} for name, entry in BUILTIN_ALIASES.items()}
    for name, entry in (getattr(settings, "collection_aliases", None) or {}).items():
        merged = table.setdefault(name, {})
        for cat, ids in entry.items():
            merged[cat] = [ids] if isinstance(ids, str) else list(ids)
    return table


@dataclass
class Resolved:
    """The collection ids to ask one catalog for, and what was translated."""

    collections: list[str] | None
    notes: list[str] = field(default_factory=list)
    left_out: list[str] = field(default_factory=list)

    @property
    def nothing_to_ask(self) -> bool:
        """Every asked name is known not to exist in this catalog."""
        return self.collections == []


def resolve(settings: Settings, catalog_id: str, collections: list[str] | None) -> Resolved:
    """`collections` as catalog `catalog_id` names them (see the module docstring)."""
    if not collections:
        return Resolved(collections)
    table = alias_table(settings)
    known_catalogs = {cat for entry in table.values() for cat in entry}
    out: list[str] = []
    notes: list[str] = []
    left_out: list[str] = []
    for name in collections:
        entry = table.get(name)
        if entry is not None and catalog_id in entry:
            ids = entry[catalog_id]
            if ids != [name]:
                notes.append(
                    f"collection '{name}' is {', '.join(repr(i) for i in ids)} in catalog '{catalog_id}'"
                )
            out += [i for i in ids if i not in out]
        elif entry is not None and catalog_id in known_catalogs:
            left_out.append(name)
        elif name not in out:
            out.append(name)
    if left_out:
        notes.append(
            f"catalog '{catalog_id}' has no {', '.join(repr(n) for n in left_out)} "
            "(collection_aliases): not asked for it"
        )
    return Resolved(out, notes, left_out)
