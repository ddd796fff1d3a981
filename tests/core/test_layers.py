"""The layers of the package: core is torch only, data flows upwards."""

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "pina_ntk"
#: Each layer and the layers it may import from.
ALLOWED = {
    "core": {"core"},
    "integration": {"core", "integration"},
    "paper": {"core", "integration", "paper"},
}


def imported_modules(path):
    """Absolute names of the modules a source file imports."""
    tree = ast.parse(path.read_text())
    package = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: -node.level]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module
            names.add(module)
    return names


def test_importing_the_core_loads_neither_pina_nor_lightning():
    # a fresh interpreter: this test process has imported both already
    code = (
        "import sys, pina_ntk.core, pina_ntk.core.estimators, "
        "pina_ntk.core.residual_functions, pina_ntk.core.safeguard, "
        "pina_ntk.core.moving_average, pina_ntk.core.weights, "
        "pina_ntk.core.checks\n"
        "loaded = sorted({m.split('.')[0] for m in sys.modules} & "
        "{'pina', 'lightning', 'pytorch_lightning'})\n"
        "print(','.join(loaded))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == ""


def test_the_public_api_still_imports_from_the_top_level():
    code = (
        "import pina_ntk\n"
        "for name in pina_ntk.__all__: getattr(pina_ntk, name)\n"
        "print(len(pina_ntk.__all__))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert int(result.stdout) == 10


@pytest.mark.parametrize("layer", sorted(ALLOWED))
def test_layers_import_only_from_below(layer):
    for path in sorted((PACKAGE / layer).rglob("*.py")):
        for module in imported_modules(path):
            parts = module.split(".")
            if parts[0] == "pina_ntk":
                assert (
                    len(parts) > 1 and parts[1] in ALLOWED[layer]
                ), f"{path.relative_to(PACKAGE)} imports {module}"
            if layer == "core":
                assert parts[0] not in (
                    "pina",
                    "lightning",
                ), f"{path.relative_to(PACKAGE)} imports {module}"


def module_name(path):
    """``pina_ntk.x.y`` of a source file (packages without ``__init__``)."""
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def import_graph():
    """``{module: {pina_ntk modules it imports anywhere in its source}}``,
    function-level imports included; ``from package import name`` counts
    as importing the submodule ``package.name`` when there is one."""
    modules = {module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph = {}
    for name, path in modules.items():
        targets = set()
        for module in imported_modules(path):
            if module in modules:
                targets.add(module)
        tree = ast.parse(path.read_text())
        package = (
            name if path.name == "__init__.py" else name.rpartition(".")[0]
        )
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[
                        : len(package.split(".")) - node.level + 1
                    ]
                    base = ".".join(up + ([node.module] if node.module else []))
                for alias in node.names:
                    if f"{base}.{alias.name}" in modules:
                        targets.add(f"{base}.{alias.name}")
        graph[name] = targets - {name}
    return graph


def test_the_import_graph_finds_known_edges():
    graph = import_graph()
    assert (
        "pina_ntk.integration.contract"
        in graph["pina_ntk.integration.kernel_weighting"]
        | graph["pina_ntk.integration.pina_adapter"]
    )
    assert (
        "pina_ntk.integration.callback"
        in graph["pina_ntk.integration.kernel_weighting"]
    )


def test_no_import_cycle_in_the_package():
    # a package imports its own submodules (its __init__); a submodule
    # importing a sibling through the package is the only allowed loop
    graph = import_graph()
    state = {}

    def visit(module, stack):
        state[module] = "open"
        for target in sorted(graph[module]):
            if module.startswith(target + "."):
                continue  # a submodule importing its own package's names
            if state.get(target) == "open":
                cycle = stack[stack.index(target) :] + [target]
                pytest.fail("import cycle: " + " -> ".join(cycle))
            if target not in state:
                visit(target, stack + [target])
        state[module] = "done"

    for module in sorted(graph):
        if module not in state:
            visit(module, [module])


#: What only ``integration/pina_adapter.py`` may touch: PINA's private
#: fields and the methods it patches.
PINA_PRIVATE = (
    "_reduction",
    "_loss_fn",
    "_saved_weights",
    "_condition_to_update",
    "_solver",
    "configure_callbacks",
)


def pina_touches(tree):
    """The PINA internals an AST touches, as readable strings."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            if node.attr in PINA_PRIVATE:
                found.append(f".{node.attr}")
            # a condition's data container: condition.data.data
            if (
                node.attr == "data"
                and isinstance(node.value, ast.Attribute)
                and node.value.attr == "data"
            ):
                found.append(".data.data")
            # patching a condition's evaluate (assignment or deletion)
            if node.attr == "evaluate" and isinstance(
                node.ctx, (ast.Store, ast.Del)
            ):
                found.append(".evaluate = ...")
    return found


def test_the_touch_finder_sees_each_kind_of_touch():
    source = (
        "s._reduction\nw._solver = s\ns.configure_callbacks = f\n"
        "c.data.data['input']\nc.evaluate = g\ndel c.evaluate\n"
    )
    assert sorted(pina_touches(ast.parse(source))) == [
        "._reduction",
        "._solver",
        ".configure_callbacks",
        ".data.data",
        ".evaluate = ...",
        ".evaluate = ...",
    ]


def test_only_the_adapter_touches_pina_internals():
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name == "pina_adapter.py":
            continue
        touched = pina_touches(ast.parse(path.read_text()))
        assert not touched, f"{path.relative_to(PACKAGE)} touches {touched}"


def test_the_callback_stays_a_thin_layer_over_its_statistics():
    # NTKCallback holds hooks and nothing else: the run's state and its
    # rules live in KernelStatistics; 150 lines is the budget (issue #55)
    tree = ast.parse((PACKAGE / "integration" / "callback.py").read_text())
    (callback,) = [
        node
        for node in tree.body
        if isinstance(node, ast.ClassDef) and node.name == "NTKCallback"
    ]
    assert callback.end_lineno - callback.lineno + 1 <= 150


# ------------------------------------------------------------------ sizes
#: The most lines of code (docstrings not counted) of a module and of a
#: class, unless docs/architecture.md names it with its size and says why.
MODULE_LINES, CLASS_LINES = 450, 250


def code_lines(tree):
    """``{name: lines}`` of a module (``""``) and its classes, counting
    every line of each but those of docstrings."""
    docstrings = set()
    for node in ast.walk(tree):
        if (
            isinstance(
                node,
                (
                    ast.Module,
                    ast.ClassDef,
                    ast.FunctionDef,
                    ast.AsyncFunctionDef,
                ),
            )
            and ast.get_docstring(node, clean=False) is not None
        ):
            first = node.body[0]
            docstrings.update(range(first.lineno, first.end_lineno + 1))
    total = max(getattr(n, "end_lineno", 0) or 0 for n in ast.walk(tree))
    sizes = {"": total - len([d for d in docstrings if d <= total])}
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            span = set(range(node.lineno, node.end_lineno + 1))
            sizes[node.name] = len(span - docstrings)
    return sizes


def oversized(package=PACKAGE):
    """``(module, class or "", lines)`` over :data:`MODULE_LINES` or
    :data:`CLASS_LINES`."""
    found = []
    for path in sorted(package.rglob("*.py")):
        for name, lines in code_lines(ast.parse(path.read_text())).items():
            limit = CLASS_LINES if name else MODULE_LINES
            if lines > limit:
                found.append(
                    (path.relative_to(package).as_posix(), name, lines)
                )
    return found


def test_no_module_or_class_is_larger_than_the_architecture_page_allows():
    page = (PACKAGE.parent / "docs" / "architecture.md").read_text()
    for module, name, lines in oversized():
        named = f"`{module}`" if not name else f"`{name}`"
        assert f"{named} ({lines} lines" in page, (
            f"{module} {name or '(module)'}: {lines} lines of code, above "
            f"{CLASS_LINES if name else MODULE_LINES}; split it, or name it "
            "with its size and the reason on docs/architecture.md"
        )


def test_the_size_count_leaves_out_docstrings_only():
    source = (
        '"""Module\n\ndocstring."""\n\n\nclass A:\n    """Doc\n    string."""\n'
        "\n    # a comment counts\n    def f(self):\n"
        '        """One line."""\n        return 1\n'
    )
    sizes = code_lines(ast.parse(source))
    # 13 lines; docstrings on lines 1-3, 7-8 and 12
    assert sizes == {"": 7, "A": 5}


def test_a_class_or_module_over_the_limits_is_found(tmp_path):
    body = "".join(f"    x{i} = {i}\n" for i in range(CLASS_LINES))
    (tmp_path / "big.py").write_text("class Big:\n" + body)
    (tmp_path / "small.py").write_text("class Small:\n" + body[:-12])
    (tmp_path / "long.py").write_text("x = 1\n" * (MODULE_LINES + 1))
    assert oversized(tmp_path) == [
        ("big.py", "Big", CLASS_LINES + 1),
        ("long.py", "", MODULE_LINES + 1),
    ]
