"""Value checks for options where they enter the library (specs, component constructors,
task configs, training and evaluation options).

Each check returns the value (converted: an int, a float) or raises ``error`` (default
:class:`~taylorformer.errors.SpecError`; tasks pass :class:`~taylorformer.errors.TaskError`)
with one message shape: ``{owner} {key!r} must be {what is allowed}, got {value!r}``.
"""
import math
import numbers
import os

from taylorformer.errors import SpecError, close_matches


def fail(owner, key, value, allowed, error=SpecError):
    """Raise ``error`` naming ``owner``, ``key``, ``value`` and what is ``allowed``."""
    raise error(f"{owner} {key!r} must be {allowed}, got {value!r}")


def is_int(value):
    """An integer that is not a bool (True is not a width)."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def check_int(owner, key, value, minimum=1, maximum=None, optional=False, error=SpecError):
    """``value`` as an int when it is an integer in ``[minimum, maximum]``, or None when
    ``optional``."""
    if optional and value is None:
        return None
    if not (is_int(value) and value >= minimum and (maximum is None or value <= maximum)):
        allowed = f"an int in [{minimum}, {maximum}]" if maximum is not None else f"an int >= {minimum}"
        fail(owner, key, value, allowed + (" or None" if optional else ""), error)
    return int(value)


#: upper bounds of a model spec's size options, by option name (``width[2]`` is a
#: ``width``): a spec (a model file's too) asking for more is refused where the option
#: enters, naming the option and the bound, so that loading a file never builds for hours
#: or exhausts memory (``encoder.layers = 2147483647``). Far above any published model.
MAX_LAYERS = 128
MAX_WIDTH = 8192
MAX_HEADS = 256
MAX_ITEMS = 65536
MAX_DIM = 4096
SIZE_BOUNDS = {
    **dict.fromkeys(("layers", "hidden_layers", "kernel_layers", "phi_layers"), MAX_LAYERS),
    **dict.fromkeys(("width", "ffn_width", "kernel_width", "phi_width", "embed_widths", "head_dim",
                     "enc_dim", "position_dim"), MAX_WIDTH),
    "num_heads": MAX_HEADS,
    # pseudo-tokens, neighbours, basis functions, mixture components, classes
    **dict.fromkeys(("num_pseudo", "k", "basis", "components", "classes"), MAX_ITEMS),
    **dict.fromkeys(("dim_x", "dim_y"), MAX_DIM),
    # execution knobs (no weights): bounded to sizes a tensor index can hold
    "tile_size": 2**24, "dense_pairs": 2**48,
}
#: the most weights (elements of all variables together) a model may create: 1 GiB of float32
MAX_PARAMETERS = 2**28


def check_size(owner, key, value, minimum=1, optional=False, error=SpecError):
    """:func:`check_int` bounded above by :data:`SIZE_BOUNDS` of ``key``."""
    return check_int(owner, key, value, minimum, SIZE_BOUNDS[key.split("[", 1)[0]], optional, error)


def check_size_bounds(owner, entry, field=""):
    """Refuse (SpecError naming the option's place, e.g. ``encoder.layers``) an integer
    size option of :data:`SIZE_BOUNDS` outside ``[0, bound]`` at any depth of the dicts and
    lists ``entry`` (a resolved spec): the bounds loading applies where each option enters,
    checked without building anything (``taylorformer info``). Other values are left to
    the component that reads them."""
    items = entry.items() if isinstance(entry, dict) else enumerate(entry) if isinstance(entry, list) else ()
    for key, value in items:
        place = f"{field}[{key}]" if isinstance(key, int) else f"{field}.{key}" if field else str(key)
        bound = SIZE_BOUNDS.get(key) if isinstance(key, str) else None
        if bound is not None:
            for i, size in enumerate(value) if isinstance(value, list) else [(None, value)]:
                if is_int(size) and not 0 <= size <= bound:
                    fail(owner, place if i is None else f"{place}[{i}]", size, f"an int in [0, {bound}]")
        check_size_bounds(owner, value, place)


def check_number(owner, key, value, low=None, high=None, low_open=False, high_open=False,
                 optional=False, error=SpecError):
    """``value`` as a float when it is a finite real number in the range (``low``/``high``:
    bounds, None for none; ``*_open``: exclusive), or None when ``optional``."""
    if optional and value is None:
        return None
    ok = (isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value)
          and (low is None or (value > low if low_open else value >= low))
          and (high is None or (value < high if high_open else value <= high)))
    if not ok:
        if low is not None and high is not None:
            allowed = f"a finite number in {'(' if low_open else '['}{low:g}, {high:g}{')' if high_open else ']'}"
        elif low is not None:
            allowed = f"a finite number {'>' if low_open else '>='} {low:g}"
        elif high is not None:
            allowed = f"a finite number {'<' if high_open else '<='} {high:g}"
        else:
            allowed = "a finite number"
        fail(owner, key, value, allowed + (" or None" if optional else ""), error)
    return float(value)


def check_bool(owner, key, value, error=SpecError):
    """``value`` when it is true or false."""
    if not isinstance(value, bool):
        fail(owner, key, value, "true or false", error)
    return value


def check_choice(owner, key, value, choices, error=SpecError):
    """``value`` when it is one of ``choices`` (a bool only if listed: True is not 1); else
    an error listing them, with close matches."""
    if isinstance(value, bool):
        if any(c is value for c in choices):
            return value
    elif isinstance(value, (str, int, float, type(None))) and value in choices:
        return value
    hint = close_matches(value, [c for c in choices if isinstance(c, str)]) if isinstance(value, str) else []
    raise error(f"{owner} {key!r} must be one of {', '.join(repr(c) for c in choices)}, got {value!r}"
                + (f"; did you mean {hint[0]!r}?" if hint else ""))


def check_widths(owner, key, value, single=True, error=SpecError):
    """A non-empty list of layer widths (ints in [1, bound of ``key``]: :data:`SIZE_BOUNDS`),
    or (``single``) one width."""
    if single and not isinstance(value, (list, tuple)):
        return check_size(owner, key, value, error=error)
    if not isinstance(value, (list, tuple)) or not value:
        fail(owner, key, value, "an int >= 1 or a non-empty list of them" if single
             else "a non-empty list of ints >= 1", error)
    return [check_size(owner, f"{key}[{i}]", w, error=error) for i, w in enumerate(value)]


def _meminfo(field):
    """Bytes of ``field`` (``MemAvailable``, ``MemTotal``) of ``/proc/meminfo``, else the
    physical memory (``SC_PHYS_PAGES * SC_PAGE_SIZE``); None where neither is known."""
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                if line.startswith(f"{field}:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, AttributeError):
        return None


def available_memory():
    """Bytes of memory this process can still allocate (``MemAvailable``; else the physical
    memory; None where neither is known)."""
    return _meminfo("MemAvailable")


def machine_memory():
    """Bytes of this machine's physical memory (``MemTotal``; None where unknown): no memory
    budget can use more."""
    return _meminfo("MemTotal")


def check_memory(owner, what, nbytes, hint, error=SpecError):
    """Refuse (``error`` naming ``what``, the memory it needs and what is available, and
    ``hint``) a computation that needs ``nbytes`` of memory, more than is available."""
    available = available_memory()
    if available is not None and nbytes > available:
        raise error(f"{owner}: {what} needs about {_size(nbytes)} of memory, {_size(available)} is "
                    f"available; {hint}")
    return nbytes


def _size(nbytes):
    for unit in ("bytes", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if nbytes < 1024 or unit == "PiB":
            return f"{nbytes:.3g} {unit}" if unit != "bytes" else f"{int(nbytes)} bytes"
        nbytes /= 1024
