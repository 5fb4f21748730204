"""What a grid coordinate is: latitude or longitude, recognised by its CF name, units,
``standard_name`` or ``axis``.

Reading a field (:mod:`taylorformer.prediction.fields`) and drawing it
(:mod:`taylorformer.plotting.fields`) both ask which of a file's coordinates is which.
"""

LAT_NAMES, LON_NAMES = ("lat", "latitude"), ("lon", "longitude")
LAT_UNITS = ("degrees_north", "degree_north", "degree_n", "degrees_n", "degreen", "degreesn")
LON_UNITS = ("degrees_east", "degree_east", "degree_e", "degrees_e", "degreee", "degreese")


def coordinate_role(name, attrs=None):
    """``"lat"``, ``"lon"`` or None: what a coordinate is, by CF name, units,
    ``standard_name`` or ``axis`` (``Y``/``X`` only with degree units)."""
    attrs = attrs or {}
    units = str(attrs.get("units", "")).strip().lower().replace(" ", "_")
    standard = str(attrs.get("standard_name", "")).strip().lower()
    name = str(name).strip().lower()
    if name in LAT_NAMES or standard in ("latitude", "grid_latitude") or units in LAT_UNITS:
        return "lat"
    if name in LON_NAMES or standard in ("longitude", "grid_longitude") or units in LON_UNITS:
        return "lon"
    return None
