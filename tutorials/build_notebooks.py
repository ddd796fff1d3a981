"""Build the tutorial notebooks from their paired percent-format scripts.

Each tutorial is written once, as a Python script in jupytext's "percent"
format (cells start with ``# %%``; ``# %% [markdown]`` cells hold Markdown
behind ``# `` prefixes), which runs as a plain script and diffs well. This
tool turns every ``tutorials/*/*.py`` into the ``.ipynb`` next to it:

    python tutorials/build_notebooks.py            # rebuild changed ones
    python tutorials/build_notebooks.py --execute  # rebuild and run (full)
    python tutorials/build_notebooks.py --check    # fail if out of sync

Conversion is jupytext's; ``--execute`` runs the notebooks with nbclient and
stores the outputs (the committed notebooks carry those of a full run of
their code; ``PINA_NTK_QUICK=1`` selects the quick settings), with each cell's
stream output coalesced as Jupyter displays it (a progress bar's updates
become its last line) and the fingerprint of the library that made them
(:func:`library_fingerprint`, in the notebook's metadata). ``--check``
compares the cell sources of each notebook with its script, ignoring
outputs, and the fingerprint with the library's present source. A
plain rebuild leaves notebooks whose cells match their script untouched, so
the outputs of their last full run survive; a changed notebook is written
without outputs.
"""

import argparse
import hashlib
import os
import sys
from pathlib import Path

import jupytext
import nbformat

HERE = Path(__file__).resolve().parent
#: jupytext's name of the scripts' format.
SCRIPT_FORMAT = "py:percent"
#: The library whose outputs the notebooks show, and the notebook metadata
#: key under which an executed notebook records its fingerprint.
LIBRARY, FINGERPRINT_KEY = HERE.parent / "pina_ntk", "pina_ntk_source"


def tutorial_scripts(root=HERE):
    """
    The paired scripts of the tutorials.

    :param pathlib.Path root: The tutorials folder.
    :return: Sorted ``*.py`` files one folder below ``root``.
    :rtype: list[pathlib.Path]
    """
    return sorted(root.glob("*/*.py"))


def notebook_from_script(path):
    """
    The notebook of a tutorial script (no outputs), with a Python 3 kernel.

    :param pathlib.Path path: The script.
    :rtype: nbformat.NotebookNode
    """
    notebook = jupytext.read(path, fmt=SCRIPT_FORMAT)
    notebook.metadata["kernelspec"] = {
        "display_name": "Python 3",
        "language": "python",
        "name": "python3",
    }
    notebook.metadata.pop("jupytext", None)
    return notebook


def library_fingerprint(root=LIBRARY):
    """
    The SHA-256 of the library's Python sources: every ``*.py`` file below
    ``root``, by its path relative to ``root`` and its bytes, in path order.

    :param pathlib.Path root: The package folder.
    :rtype: str
    """
    digest = hashlib.sha256()
    for path in sorted(Path(root).rglob("*.py")):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()


def stale_outputs(path, root=LIBRARY):
    """
    Whether a script's notebook was executed by other library code than the
    present source (or records no fingerprint).

    :param pathlib.Path path: The script.
    :param pathlib.Path root: The package folder.
    :return: A description of the difference, or ``None``.
    :rtype: str | None
    """
    target = Path(path).with_suffix(".ipynb")
    recorded = nbformat.read(target, as_version=4).metadata.get(FINGERPRINT_KEY)
    if recorded != library_fingerprint(root):
        return (
            f"{target}: outputs made by another library source ({recorded}); "
            "run build_notebooks.py --execute"
        )
    return None


def _cells(notebook):
    return [(cell.cell_type, cell.source) for cell in notebook.cells]


def out_of_sync(path):
    """
    Whether a script's notebook is missing or has other cells.

    :param pathlib.Path path: The script.
    :return: A description of the difference, or ``None``.
    :rtype: str | None
    """
    target = Path(path).with_suffix(".ipynb")
    if not target.exists():
        return f"{target} is missing"
    stored = _cells(nbformat.read(target, as_version=4))
    wanted = _cells(notebook_from_script(path))
    for i, (got, want) in enumerate(zip(stored, wanted)):
        if got != want:
            return f"{target}: cell {i} differs from {Path(path).name}"
    if len(stored) != len(wanted):
        return f"{target}: {len(stored)} cells, script has {len(wanted)}"
    return None


def execute(notebook, folder, timeout=None):
    """
    Run a notebook in ``folder`` and keep its outputs.

    :param nbformat.NotebookNode notebook: The notebook.
    :param pathlib.Path folder: The working directory.
    :param int timeout: Seconds allowed per cell (``None``: no limit).
    :rtype: nbformat.NotebookNode
    """
    from nbclient import NotebookClient

    client = NotebookClient(
        notebook,
        timeout=timeout,
        kernel_name="python3",
        resources={"metadata": {"path": str(folder)}},
    )
    # The kernel must draw inline figures whatever backend the caller's
    # environment selects (CI exports MPLBACKEND=Agg, which would leave the
    # notebook without images).
    env = {k: v for k, v in os.environ.items() if k != "MPLBACKEND"}
    client.execute(env=env)
    notebook.metadata[FINGERPRINT_KEY] = library_fingerprint()
    return coalesce_streams(notebook)


def coalesce_streams(notebook):
    """
    Merge each cell's consecutive stream outputs and drop the text that a
    carriage return overwrites, as a notebook front end displays them.

    A progress bar writes one stream output per update; stored as they come,
    a 10,000-step training would fill the notebook with hundreds of outputs
    that a viewer draws on top of each other. nbconvert's preprocessor keeps
    only what the reader would see: the bar's final state.

    :param nbformat.NotebookNode notebook: The notebook (changed in place).
    :return: The notebook.
    :rtype: nbformat.NotebookNode
    """
    from nbconvert.preprocessors import CoalesceStreamsPreprocessor

    notebook, _ = CoalesceStreamsPreprocessor().preprocess(notebook, {})
    return notebook


def main(argv=None):
    """
    Command line of the builder.

    :param list argv: Arguments (default ``sys.argv[1:]``).
    :return: The exit status (1 when ``--check`` finds a difference).
    :rtype: int
    """
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--execute", action="store_true")
    group.add_argument("--check", action="store_true")
    parser.add_argument(
        "scripts", nargs="*", type=Path, help="default: every tutorial"
    )
    args = parser.parse_args(argv)
    scripts = args.scripts or tutorial_scripts()
    if args.check:
        found = [f(p) for p in scripts for f in (out_of_sync, stale_outputs)]
        problems = [p for p in found if p]
        for problem in problems:
            print(problem)
        return 1 if problems else 0
    for script in scripts:
        target = script.with_suffix(".ipynb")
        if not args.execute and out_of_sync(script) is None:
            # same cells: keep the notebook and the outputs of its last run
            print(f"{target} is up to date")
            continue
        notebook = notebook_from_script(script)
        if args.execute:
            notebook = execute(notebook, script.parent)
        nbformat.write(notebook, target)
        print(f"wrote {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
