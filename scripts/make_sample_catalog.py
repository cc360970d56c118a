"""Build the bundled offline ``sample`` STAC catalog (synthetic data, known cloud truth).

Rebuild (from the repository root)::

    python scripts/make_sample_catalog.py            # writes stac_gdal_mcp/data/sample/
    python scripts/make_sample_catalog.py --out /tmp/sample

The output is a self-contained static catalog: ``catalog.json`` -> collections
``sentinel-2-l2a`` (5 items) and ``landsat-c2-l2`` (3 items) -> items with relative links and
COG assets written by :func:`stac_gdal_mcp.testing.synthetic.write_scene`, all over one small area
around Gorizia / Nova Gorica (about 45.93 N, 13.61 E, UTM zone 33N, MGRS tile 33TUL, WRS-2
190/028), June to September 2024, from clear to overcast.  ``truth.json`` maps each item id
to the cloud/shadow/... fractions counted from its mask.  The build is deterministic: the
same code and library versions write the same bytes.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # run from a checkout without installing the package
    sys.path.insert(0, str(REPO))

from stac_gdal_mcp.testing import synthetic  # noqa: E402

DEFAULT_OUT = REPO / "stac_gdal_mcp" / "data" / "sample"
EPSG = 32633

# Sentinel-2: 512 x 512 px at 10 m (5.12 km), on the 33TUL tile grid.
S2_ORIGIN = (390000.0, 5090000.0)
# One row a scene: item id, datetime, seed, then the cover fractions of COVER (of the valid
# pixels; nodata of the whole grid), 0 where the scene has none.
COVER = ("cloud", "shadow", "cirrus", "water", "nodata")
S2_SCENES = [
    ("S2B_33TUL_20240604_0_L2A", "2024-06-04T10:06:21Z", 11, 0.62, 0.08, 0.03, 0.02, 0.0),
    ("S2A_33TUL_20240619_0_L2A", "2024-06-19T10:06:18Z", 12, 0.0, 0.0, 0.0, 0.03, 0.0),
    ("S2B_33TUL_20240714_0_L2A", "2024-07-14T10:06:22Z", 13, 0.15, 0.04, 0.02, 0.03, 0.12),
    ("S2A_33TUL_20240808_0_L2A", "2024-08-08T10:06:19Z", 14, 0.05, 0.01, 0.0, 0.03, 0.0),
    ("S2B_33TUL_20240912_0_L2A", "2024-09-12T10:06:25Z", 15, 0.93, 0.02, 0.0, 0.01, 0.0),
]

# Landsat: 256 x 256 px at 30 m (7.68 km), covering the Sentinel-2 area with a margin.
LANDSAT_ORIGIN = (387615.0, 5092215.0)
LANDSAT_SCENES = [
    ("LC09_L2SP_190028_20240627_02_T1", "2024-06-27T09:52:41Z", 21, 0.02, 0.005, 0.0, 0.03, 0.0),
    ("LC08_L2SP_190028_20240806_02_T1", "2024-08-06T09:52:55Z", 22, 0.35, 0.06, 0.04, 0.02, 0.0),
    ("LC09_L2SP_190028_20240915_02_T1", "2024-09-15T09:52:48Z", 23, 0.12, 0.03, 0.0, 0.03, 0.08),
]


def scene_arguments(row: tuple) -> dict:
    """synthetic.write_scene's arguments of one scene row."""
    item_id, datetime, seed, *cover = row
    fractions = {f"{name}_fraction": value for name, value in zip(COVER, cover, strict=True)}
    return {"item_id": item_id, "datetime": datetime, "seed": seed, **fractions}


SAMPLE = {
    "sentinel-2-l2a": dict(origin=S2_ORIGIN, size_px=512, scenes=S2_SCENES),
    "landsat-c2-l2": dict(origin=LANDSAT_ORIGIN, size_px=256, scenes=LANDSAT_SCENES),
}
BLOCKSIZE = 128  # small tiles so that even the 256 px rasters get an internal overview


def build(out: Path) -> dict[str, dict]:
    """Write the catalog into the (empty or new) directory ``out``; return the truth."""
    import pystac

    catalog = pystac.Catalog(
        id="sample",
        title="stac-gdal-mcp offline sample",
        description=(
            "Synthetic Sentinel-2 L2A-like and Landsat C2 L2-like scenes over Gorizia / Nova "
            "Gorica (June-September 2024) with known cloud cover, written by "
            "scripts/make_sample_catalog.py. Not real observations."
        ),
    )
    truth: dict[str, dict] = {}
    for kind, sample in SAMPLE.items():
        collection = pystac.Collection.from_dict(synthetic.collection(kind), migrate=False)
        for scene in sample["scenes"]:
            item_dict, scene_truth = synthetic.write_scene(
                kind,
                out / kind,
                epsg=EPSG,
                origin=sample["origin"],
                size_px=sample["size_px"],
                blocksize=BLOCKSIZE,
                **scene_arguments(scene),
            )
            collection.add_item(pystac.Item.from_dict(item_dict, migrate=False))
            truth[item_dict["id"]] = scene_truth
        collection.update_extent_from_items()
        catalog.add_child(collection)
    catalog.normalize_hrefs(str(out))
    catalog.save(pystac.CatalogType.SELF_CONTAINED)
    with open(out / "truth.json", "w", encoding="utf-8") as f:
        json.dump(truth, f, indent=2, sort_keys=True)
        f.write("\n")
    return truth


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--out",
        type=Path,
        default=DEFAULT_OUT,
        help=f"output directory, replaced if it exists (default: {DEFAULT_OUT})",
    )
    args = parser.parse_args(argv)
    out = args.out.resolve()
    out.parent.mkdir(parents=True, exist_ok=True)

    import pystac

    previous_version = pystac.get_stac_version()
    pystac.set_stac_version(synthetic.STAC_VERSION)  # write STAC 1.0.0 like Earth Search v1
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}-", dir=out.parent))
    staging.chmod(0o755)
    try:
        truth = build(staging)
        if out.exists():  # swap in the new tree, then drop the old one
            old = Path(tempfile.mkdtemp(prefix=f".{out.name}-old-", dir=out.parent))
            out.rename(old / out.name)
            staging.rename(out)
            shutil.rmtree(old)
        else:
            staging.rename(out)
    finally:
        pystac.set_stac_version(previous_version)
        if staging.exists():
            shutil.rmtree(staging)

    size = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
    print(f"wrote {len(truth)} items to {out} ({size / 1e6:.2f} MB)")
    for item_id, t in truth.items():
        print(
            f"  {item_id}: cloud {t['cloud_fraction']:.3f} shadow {t['shadow_fraction']:.3f} "
            f"nodata {t['nodata_fraction']:.3f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
