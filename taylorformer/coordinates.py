"""What a grid coordinate is: latitude or longitude, recognised by its CF name, units,
``standard_name`` or ``axis``; and which map axis it goes on (:func:`map_axis`: longitude
or easting across, latitude or northing up).

Reading a field (:mod:`taylorformer.prediction.fields`) and drawing it
(:mod:`taylorformer.plotting.fields`) both ask which of a file's coordinates is which.
"""

LAT_NAMES, LON_NAMES = ("lat", "latitude"), ("lon", "longitude")
LAT_UNITS = ("degrees_north", "degree_north", "degree_n", "degrees_n", "degreen", "degreesn")
LON_UNITS = ("degrees_east", "degree_east", "degree_e", "degrees_e", "degreee", "degreese")
#: projected (map) coordinates by name and CF ``standard_name``
EASTING_NAMES, NORTHING_NAMES = ("x", "easting", "eastings"), ("y", "northing", "northings")
EASTING_STANDARD, NORTHING_STANDARD = "projection_x_coordinate", "projection_y_coordinate"


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


def map_axis(name, attrs=None):
    """``"X"`` (across), ``"Y"`` (up) or None: where a coordinate goes on a map. Longitude
    and easting across, latitude and northing up, by :func:`coordinate_role`, projected
    names (``x``/``easting``, ``y``/``northing``), CF ``standard_name``
    (``projection_x_coordinate``/``projection_y_coordinate``) or ``axis``."""
    attrs = attrs or {}
    standard = str(attrs.get("standard_name", "")).strip().lower()
    if standard in (EASTING_STANDARD, NORTHING_STANDARD):
        return "X" if standard == EASTING_STANDARD else "Y"
    role = coordinate_role(name, attrs)
    if role is not None:
        return "X" if role == "lon" else "Y"
    name = str(name).strip().lower()
    if name in EASTING_NAMES + NORTHING_NAMES:
        return "X" if name in EASTING_NAMES else "Y"
    axis = str(attrs.get("axis", "")).strip().upper()
    return axis if axis in ("X", "Y") else None
