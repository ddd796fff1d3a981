"""Render the tutorial notebooks, which live outside ``docs/``, as pages.

A stub ``docs/<dir>/<name>.nblink`` holds ``{"path": "<notebook>"}``, the
notebook's path relative to the repository root. MyST-NB reads the stub with
:func:`read_linked_notebook` (``nb_custom_formats`` in ``conf.py``) and
renders the notebook's committed outputs; nothing is copied into ``docs/``
and nothing is executed.

The notebook is adapted in memory only:

* relative links in markdown cells are written for the notebook's own
  folder (``../qtensor/qtensor_ntk.ipynb``, ``../../docs/benchmarks.md``);
  they are rewritten for the stub's folder, to the stub of a linked notebook
  and to the page of a linked file under ``docs/``;
* a notebook without ``language_info`` (as written by jupytext, before it is
  executed) gets the IPython lexer of its Python kernel, so that cells such
  as ``!pip install ...`` highlight without a warning.
"""

import json
import os
import re

import nbformat

#: The ``docs/`` folder and the repository root.
DOCS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ROOT = os.path.dirname(DOCS)
#: The stub suffix.
SUFFIX = ".nblink"
#: The target of a markdown link or image: ``](target`` up to ``)``, ``#``
#: or white space.
LINK = re.compile(r"(\]\(\s*<?)([^)\s#>]*)")
#: A URL scheme (``https:``, ``mailto:``, ...).
SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


def notebook_path(text):
    """
    The notebook a stub names.

    :param str text: The stub's content.
    :return: The notebook's absolute path.
    :rtype: str
    """
    return os.path.normpath(os.path.join(ROOT, json.loads(text)["path"]))


def stubs():
    """
    Every stub under ``docs/``.

    :return: ``{notebook path: stub path}``, absolute paths.
    :rtype: dict
    """
    found = {}
    for folder, _, files in os.walk(DOCS):
        for name in files:
            if name.endswith(SUFFIX):
                stub = os.path.join(folder, name)
                with open(stub, encoding="utf-8") as f:
                    found[notebook_path(f.read())] = stub
    return found


def rewrite_link(target, notebook, stub, linked):
    """
    A link target of ``notebook`` as seen from ``stub``.

    :param str target: The link target, without its ``#anchor``.
    :param str notebook: The notebook's path.
    :param str stub: The stub's path.
    :param dict linked: ``{notebook path: stub path}``.
    :return: The rewritten target, or ``target`` if it is not a relative
        path to a notebook with a stub or to a file under ``docs/``.
    :rtype: str
    """
    if not target or SCHEME.match(target) or target.startswith("/"):
        return target
    real = os.path.normpath(os.path.join(os.path.dirname(notebook), target))
    if real in linked:
        real = linked[real]
    elif os.path.commonpath([real, DOCS]) != DOCS:
        return target
    return os.path.relpath(real, os.path.dirname(stub)).replace(os.sep, "/")


def read_linked_notebook(text):
    """
    The notebook a stub names, adapted to the stub's place (module notes).

    :param str text: The stub's content.
    :return: The notebook.
    :rtype: nbformat.NotebookNode
    """
    path = notebook_path(text)
    with open(path, encoding="utf-8") as f:
        notebook = nbformat.read(f, as_version=4)
    linked = stubs()
    stub = linked[path]

    def replace(match):
        return match.group(1) + rewrite_link(match.group(2), path, stub, linked)

    for cell in notebook.cells:
        if cell.cell_type == "markdown":
            cell.source = LINK.sub(replace, cell.source)
    kernel = notebook.metadata.get("kernelspec", {})
    if "language_info" not in notebook.metadata and (
        kernel.get("language") == "python"
    ):
        notebook.metadata["language_info"] = {
            "name": "python",
            "pygments_lexer": "ipython3",
        }
    return notebook


def note_notebook(app, docname, source):
    """
    Rebuild a stub's page when its notebook changes (``source-read``).
    """
    path = app.env.doc2path(docname)
    if str(path).endswith(SUFFIX):
        app.env.note_dependency(notebook_path(source[0]))


def setup(app):
    """Register the dependency of each stub on its notebook."""
    app.connect("source-read", note_notebook)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
