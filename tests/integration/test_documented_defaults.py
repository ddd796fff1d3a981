"""Every default a public class or function documents is the default its
signature has: the ``:param:`` paragraph's ``Default ``X```` (or ````X``
(default)``, or ``Default is :data:`NAME```), read as a Python literal."""

import ast
import inspect
import re
import sys

import pytest

import pina_ntk

PUBLIC = [
    pina_ntk.SketchNTKWeighting,
    pina_ntk.NTKWeighting,
    pina_ntk.NTKCallback,
    pina_ntk.NTKDiagnosticsCallback,
    pina_ntk.SpacedUpdateSafeguard,
    pina_ntk.ntk_traces,
    pina_ntk.solver_ntk_weights,
]
PATTERNS = (
    r"Default(?: is)? ``([^`]+)``",
    r"``([^`]+)`` \(default\)",
    r"Default(?: is)? :data:`~?([\w.]+)`",
)


def documented_default(obj, name):
    """:return: The default stated in ``name``'s ``:param:`` paragraph."""
    paragraphs = re.split(r"\n(?=:)", inspect.getdoc(obj))
    found = [
        " ".join(p.split())
        for p in paragraphs
        if re.match(rf":param (?:[\w\[\], |.]+ )?{name}:", p)
    ]
    assert len(found) == 1, f"{obj.__qualname__}: no :param {name}:"
    for pattern in PATTERNS:
        match = re.search(pattern, found[0])
        if match is None:
            continue
        text = match.group(1)
        if pattern == PATTERNS[2]:  # a module constant
            module = sys.modules[inspect.unwrap(obj).__module__]
            return getattr(module, text.rpartition(".")[2])
        return ast.literal_eval(text)
    raise AssertionError(f"{obj.__qualname__}: {name}'s default undocumented")


def defaults(obj):
    signature = inspect.signature(obj.__init__ if inspect.isclass(obj) else obj)
    return [
        (obj, name, parameter.default)
        for name, parameter in signature.parameters.items()
        if parameter.default is not inspect.Parameter.empty
    ]


@pytest.mark.parametrize(
    "obj,name,default",
    [case for obj in PUBLIC for case in defaults(obj)],
    ids=lambda value: getattr(value, "__qualname__", None),
)
def test_the_documented_default_is_the_signatures(obj, name, default):
    documented = documented_default(obj, name)
    assert documented == default and type(documented) in (
        type(default),
        int if isinstance(default, float) else type(default),
    ), f"{obj.__qualname__}({name}=...): documented {documented!r}"


#: The classes, and the options whose value an instance keeps as given
#: (``safeguard="default"`` is resolved to an object: tested with it).
CLASSES = [obj for obj in PUBLIC if inspect.isclass(obj)]
RESOLVED = {"safeguard"}


@pytest.mark.parametrize(
    "cls,name",
    [(c, n) for c in CLASSES for _, n, _ in defaults(c) if n not in RESOLVED],
    ids=lambda value: getattr(value, "__qualname__", value),
)
def test_an_instance_built_without_arguments_keeps_the_documented_default(
    cls, name
):
    # the constructor's own defaults, not its signature's: a wrapper (as a
    # mutation tool's) shows the signature of the function it wraps
    kept = getattr(cls(), name)
    documented = documented_default(cls, name)
    assert kept == documented and type(documented) in (
        type(kept),
        int if isinstance(kept, float) else type(kept),
    ), f"{cls.__qualname__}().{name} = {kept!r}, documented {documented!r}"
