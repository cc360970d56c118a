"""Field-like polygons (GeoJSON Features in WGS84) for zonal statistics."""

from __future__ import annotations

# ------------------------------------------------------------------ field polygons


def field_polygons(
    epsg: int,
    bounds,
    count: int,
    *,
    seed: int = 0,
    clusters: int = 4,
    size_m: tuple[float, float] = (80.0, 400.0),
    holes_every: int = 7,
    multi_every: int = 11,
) -> list[dict]:
    """GeoJSON Features (WGS84) of ``count`` field-like polygons in ``clusters`` clusters inside
    ``bounds`` (x0, y0, x1, y1 in ``epsg`` metres): rotated rectangles ``size_m`` across, every
    ``holes_every``-th with a hole (a pond), every ``multi_every``-th a MultiPolygon of two parts.
    Feature ids ``field-<n>``, property ``name``; vertices off the pixel grid on purpose."""
    import numpy as np
    from pyproj import Transformer
    from shapely import affinity
    from shapely import transform as apply
    from shapely.geometry import MultiPolygon, Polygon, box, mapping

    rng = np.random.default_rng(seed)
    x0, y0, x1, y1 = bounds
    centres = rng.uniform(
        (x0 + 0.1 * (x1 - x0), y0 + 0.1 * (y1 - y0)),
        (x1 - 0.1 * (x1 - x0), y1 - 0.1 * (y1 - y0)),
        (clusters, 2),
    )
    spread = 0.08 * min(x1 - x0, y1 - y0)
    to_wgs84 = Transformer.from_crs(epsg, 4326, always_xy=True)
    features = []
    for n in range(count):
        cx, cy = centres[n % clusters] + rng.normal(0, spread, 2)
        w, h = rng.uniform(*size_m, 2)
        shape = affinity.rotate(box(cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2), rng.uniform(0, 90))
        if holes_every and n % holes_every == holes_every - 1:
            shape = Polygon(shape.exterior, [box(cx - w / 8, cy - h / 8, cx + w / 8, cy + h / 8).exterior])
        if multi_every and n % multi_every == multi_every - 1:
            shape = MultiPolygon([shape, affinity.translate(shape, w * 1.5, 0)])
        geometry = apply(shape, to_wgs84.transform, interleaved=False)
        features.append(
            {
                "type": "Feature",
                "id": f"field-{n}",
                "properties": {"name": f"field {n}"},
                "geometry": mapping(geometry),
            }
        )
    return features
