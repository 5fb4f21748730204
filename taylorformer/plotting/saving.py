"""Writing a figure to a file: the image types matplotlib writes, and an atomic save."""
import os

from taylorformer.files import atomic_path


def image_formats():
    """The extensions of the image types matplotlib's Agg canvas writes, ``.png`` first
    (``.pdf``, ``.svg``, ``.jpg``, ...): what a plot output may be named."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    supported = FigureCanvasAgg(Figure()).get_supported_filetypes()
    return (".png",) + tuple(sorted(f".{ext}" for ext in supported if ext != "png"))


def save_figure(fig, path, dpi=110):
    """Write ``fig`` to ``path`` in the image type its extension names (``png`` without
    one), atomically (:func:`taylorformer.files.atomic_path`); returns ``path``."""
    image_type = os.path.splitext(os.fspath(path))[1][1:].lower() or "png"
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format=image_type, dpi=dpi)
    return path
