"""Sphinx configuration of the pina-ntk documentation.

Build with ``python -m sphinx -W -b html docs docs/_build/html`` after
``pip install ".[docs]"``. Nothing is downloaded at build time (no
intersphinx) and the tutorial notebooks are rendered with their committed
outputs, never executed.
"""

import importlib.util
import os
import sys

# Document the working tree, not an installed copy.
ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, ROOT)
# the local extension that renders the notebooks of tutorials/
sys.path.insert(0, os.path.join(ROOT, "docs", "_ext"))

import pina_ntk  # noqa: E402  (after the path)

# -- Project information ------------------------------------------------------

project = "pina-ntk"
author = "pina-ntk developers"
copyright = "pina-ntk developers"
version = pina_ntk.__version__
release = version

# -- General configuration ----------------------------------------------------

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    # MathJax bundled into _static/mathjax: formulas render offline
    # (tests/test_docs.py checks the built pages load no remote script)
    "sphinx-mathjax-offline",
    # myst_nb loads myst_parser: the markdown pages and the notebooks
    "myst_nb",
    "notebook_link",
]

root_doc = "index"
language = "en"
exclude_patterns = ["_build", "_ext", "Thumbs.db", ".DS_Store"]

# -- autodoc (PINA's settings) ------------------------------------------------

autodoc_member_order = "bysource"
autoclass_content = "class"
add_module_names = False
add_function_parentheses = True
# every API page is written by hand (docs/api/): autosummary only draws the
# table of the public API, it generates no files
autosummary_generate = False
# The finite-element reference imports scikit-fem and SciPy (the ``fem``
# extra); mock them only when they are not installed, so that ``.[docs]``
# alone can build the pages.
autodoc_mock_imports = [
    name
    for name in ("skfem", "scipy")
    if importlib.util.find_spec(name) is None
]

# -- MyST and MyST-NB ---------------------------------------------------------

myst_enable_extensions = ["dollarmath", "amsmath"]
# anchors for links such as benchmark-method.md#time-per-step
myst_heading_anchors = 3
# render the committed outputs; never run a notebook while building
nb_execution_mode = "off"
# a cell's Markdown output (the tutorials' tables and their generated text)
# is parsed as MyST, so its tables and $math$ render as in Jupyter; the
# default, CommonMark, has neither
nb_render_markdown_format = "myst"
# docs/tutorials/*/*.nblink stubs name the notebooks of tutorials/
nb_custom_formats = {".nblink": "notebook_link.read_linked_notebook"}

# -- HTML output (PINA's theme) -----------------------------------------------

html_theme = "pydata_sphinx_theme"
html_title = f"pina-ntk {version}"
html_theme_options = {
    "show_prev_next": False,
    "header_links_before_dropdown": 6,
    "navigation_with_keys": False,
}
html_show_sourcelink = True
html_last_updated_fmt = None

# -- References to re-exported names ------------------------------------------


def canonical_name(target, modname):
    """
    The defining name of a ``pina_ntk`` object that a reference names by a
    re-export: the public API (``pina_ntk.NTKCallback`` or
    ``NTKCallback``), a package's ``__all__``
    (``pina_ntk.paper.reference.QTensorFEMSolution``) or a name imported
    into the module the reference is written in
    (``KernelWeighting.prepare_sample`` in
    :mod:`pina_ntk.integration.ntk_weighting`).

    :param str target: The reference's target.
    :param str modname: The module the reference is written in, or ``None``.
    :return: ``module.qualname[.member]``, or ``None`` if ``target`` is not
        a ``pina_ntk`` object.
    :rtype: str
    """
    parts = target.split(".")
    lookups = []
    if modname and modname.startswith("pina_ntk"):
        lookups.append((modname, parts))
    if parts[0] in pina_ntk.__all__:
        lookups.append(("pina_ntk", parts))
    if parts[0] == "pina_ntk":
        lookups += [
            (".".join(parts[:i]), parts[i:])
            for i in range(len(parts) - 1, 0, -1)
        ]
    for module, rest in lookups:
        try:
            obj = getattr(importlib.import_module(module), rest[0])
        except (ImportError, AttributeError):
            continue
        home = getattr(obj, "__module__", None) or ""
        qualname = getattr(obj, "__qualname__", None)
        if home.startswith("pina_ntk") and qualname:
            return ".".join([home, qualname, *rest[1:]])
    return None


def resolve_reexport(app, env, node, contnode):
    """
    Resolve a reference to a re-exported ``pina_ntk`` name to the page of
    the object (documented where it is defined).

    :return: The reference node, or ``None`` to leave the reference alone.
    """
    if node.get("refdomain") != "py":
        return None
    target = canonical_name(node.get("reftarget", ""), node.get("py:module"))
    if target is None or target == node.get("reftarget"):
        return None
    return env.get_domain("py").resolve_xref(
        env,
        node["refdoc"],
        app.builder,
        node["reftype"],
        target,
        node,
        contnode,
    )


# -- Known docstring problems -------------------------------------------------


def setup(app):
    app.connect("missing-reference", resolve_reexport)
