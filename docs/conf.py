"""Sphinx configuration of the jetstream_sync docs site (built by ``docs/build``)."""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "_ext"))
sys.path.insert(0, str(HERE.parent))

import jetstream_sync  # noqa: E402

project = "jetstream_sync"
author = "the jetstream_sync authors"
copyright = "the jetstream_sync authors"
release = jetstream_sync.__version__
version = release

# No sphinx.ext.viewcode: highlighting every module's source doubled the build's time.
extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    # plots drawn with matplotlib at build time (the benchmarks): in MyST, a ```{eval-rst}```
    # block holding a `.. plot::` directive (a ```{plot}``` fence is not supported)
    "matplotlib.sphinxext.plot_directive",
    "jss_apiref",
]

source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build", "_ext", "Thumbs.db", ".DS_Store", "ARCHITECTURE.md"]

myst_enable_extensions = ["colon_fence", "deflist"]
myst_heading_anchors = 4

# autodoc: signatures as written, members in source order, types in the signature.
autodoc_member_order = "bysource"
autodoc_typehints = "signature"
autodoc_preserve_defaults = True
autoclass_content = "both"
# a long signature (connect has forty options) gets one parameter a line
python_maximum_signature_line_length = 88
napoleon_google_docstring = True
napoleon_numpy_docstring = False

plot_formats = [("png", 110)]
plot_html_show_formats = False
plot_html_show_source_link = False
plot_include_source = False

html_theme = "furo"
html_title = f"jetstream_sync {release}"
html_static_path: list[str] = []
html_show_sourcelink = False
