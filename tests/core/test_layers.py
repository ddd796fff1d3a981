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


def test_only_the_adapter_reads_private_fields_of_pina():
    # PINA's private fields are read in one adapter function each
    private = (
        "_reduction",
        "_loss_fn",
        "_saved_weights",
        "_condition_to_update",
    )
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name == "pina_adapter.py":
            continue
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and node.attr in private:
                pytest.fail(f"{path.relative_to(PACKAGE)} reads .{node.attr}")
