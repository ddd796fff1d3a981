"""pytest plugin: a test that changes the conditions a PINA problem class
declares fails, and the class gets them back.

PINA keeps a problem's conditions in a dict of its class, shared by every
instance; a ``Trainer`` (or the problem's own ``__init__``) writing there
hands one test's points to the next. Tests build their problems with
``helpers.own_problem``; this plugin keeps them to it. Loaded by
``conftest.py``; ``tests/test_isolation.py`` runs it on tests of its own.
"""

import pytest
from pina.problem import AbstractProblem


def _declared_conditions():
    """Every loaded problem class that declares ``conditions`` in its body,
    with a shallow copy of that dict."""
    classes, todo = set(), [AbstractProblem]
    while todo:
        cls = todo.pop()
        if cls not in classes:
            classes.add(cls)
            todo.extend(cls.__subclasses__())
    return {
        cls: dict(cls.__dict__["conditions"])
        for cls in classes
        if isinstance(cls.__dict__.get("conditions"), dict)
    }


@pytest.fixture(autouse=True)
def _problem_classes_stay_pristine():
    # A problem class's declared conditions are shared by its instances; a
    # Trainer or SupervisedProblem writing there hands one test's points to
    # the next (helpers.own_problem gives an instance conditions of its own).
    # Restore them, so the damage stays in the test that did it, and fail it.
    declared = _declared_conditions()
    yield
    changed = []
    for cls, now in _declared_conditions().items():
        before = declared.get(cls)
        if before is not None and (
            now.keys() != before.keys()
            or any(now[name] is not before[name] for name in now)
        ):
            changed.append(cls.__qualname__)
            cls.conditions.clear()
            cls.conditions.update(before)
    if changed:
        pytest.fail(
            "the test changed the conditions declared by "
            f"{', '.join(sorted(changed))}; build the problem with "
            "helpers.own_problem",
            pytrace=False,
        )
