"""Sphinx configuration for the bread_stan documentation site.

Built offline: no intersphinx, no notebook execution (the notebooks are committed with
their outputs), no pandoc.  Build with warnings as errors from the repository root:

    sphinx-build -W --keep-going -b html docs docs/_build/html
"""

from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent
# Document the checkout this file sits in, not whichever bread_stan is installed.
sys.path.insert(0, str(ROOT))

import bread_stan  # noqa: E402

project = "bread_stan"
author = "the bread_stan developers"
copyright = "the bread_stan developers"
release = bread_stan.__version__
version = release

extensions = [
    "myst_nb",  # Markdown pages (MyST) and notebooks, rendered from their saved outputs
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinxarg.ext",  # the CLI reference, from the argparse parser
]

# .rst first: autosummary writes its generated pages with the first suffix.
source_suffix = {".rst": "restructuredtext", ".md": "myst-nb", ".ipynb": "myst-nb"}
exclude_patterns = ["_build", "Thumbs.db", ".DS_Store", "**.ipynb_checkpoints"]
templates_path = ["_templates"]

# Notebooks: render what was saved; never run them while building.
nb_execution_mode = "off"
# The notebooks live in notebooks/ at the top of the repository; copy them in.
_EXAMPLES = DOCS / "examples"
_EXAMPLES.mkdir(exist_ok=True)
for _nb in sorted((ROOT / "notebooks").glob("*.ipynb")):
    _dest = _EXAMPLES / _nb.name
    if not _dest.exists() or _dest.read_bytes() != _nb.read_bytes():
        shutil.copyfile(_nb, _dest)

# The pages link to the notebooks where they are in the repository (../../notebooks/X.ipynb
# from docs/guides/), which is right on GitHub; in the site they are the copies above.
_NOTEBOOK_LINK = re.compile(r"\]\(((?:\.\./)+)notebooks/([\w.-]+\.ipynb)\)")


def _notebook_links(app, docname, source):
    up = "../" * docname.count("/")
    source[0] = _NOTEBOOK_LINK.sub(
        lambda m: f"]({up}examples/{m.group(2)})" if m.group(1) == up + "../" else m.group(0),
        source[0])


def setup(app):
    app.connect("source-read", _notebook_links)


# No math extension: formulas are plain text, so pages read offline and on GitHub.
myst_enable_extensions = ["colon_fence", "deflist"]
myst_heading_anchors = 3

# API reference: one page per module, found recursively, so that renamed or new
# modules appear without editing any page.
autosummary_generate = True
# Document each object where it is defined (its module page), not again where it is
# re-exported (bread_stan.bread is bread_stan.workflows.bread.bread).
autosummary_ignore_module_all = True
autosummary_imported_members = False
# ignore-module-all: a module page documents what the module defines, not what its
# __all__ re-exports from elsewhere (no object is described twice).
autodoc_default_options = {"members": True, "ignore-module-all": True}
autodoc_typehints = "description"
autodoc_member_order = "bysource"
autoclass_content = "both"

html_theme = "furo"
html_title = f"bread_stan {release}"
html_static_path = ["_static"]
html_css_files = ["custom.css"]

