"""The shared argument checks (``pina_ntk.core.checks``): bad input raises a
ValueError that names the parameter and what was expected; the accepted
boundary values pass (and come back as floats where the check converts)."""

import math
import re

import pytest

from pina_ntk.core.checks import (
    check_bool,
    check_choice,
    check_finite,
    check_int,
    check_optional_interval,
    check_positive,
    check_rate,
)


def expect_error(check, message, *args):
    # the message starts with the parameter's name ("n" here), so anchoring
    # it also catches a check that reports some other name
    with pytest.raises(ValueError, match="^" + re.escape(message)):
        check(*args)


@pytest.mark.parametrize("value", [0, -3, True, False, 1.0, "2", None])
def test_int_rejects_non_integers_and_values_below_minimum(value):
    expect_error(check_int, "n must be an integer >= 1", "n", value, 1)


@pytest.mark.parametrize("value,minimum", [(1, 1), (7, 1), (0, 0), (-2, -2)])
def test_int_accepts_the_minimum_and_above(value, minimum):
    assert check_int("n", value, minimum) is None


@pytest.mark.parametrize("value", [0, 1, "True", None])
def test_bool_rejects_non_bools(value):
    expect_error(check_bool, "n must be a bool", "n", value)


@pytest.mark.parametrize("value", [True, False])
def test_bool_accepts_bools(value):
    assert check_bool("n", value) is None


def test_choice_rejects_unknown_values_and_lists_the_choices():
    expect_error(
        check_choice,
        "n must be one of ('mean', 'sum'), got 'max'",
        "n",
        "max",
        ("mean", "sum"),
    )


@pytest.mark.parametrize("value", ["mean", "sum"])
def test_choice_accepts_each_choice(value):
    assert check_choice("n", value, ("mean", "sum")) is None


@pytest.mark.parametrize("value", [0, -1, 2.5, True, "10"])
def test_optional_interval_rejects_non_positive_or_non_integers(value):
    expect_error(
        check_optional_interval, "n must be an integer >= 1", "n", value
    )


@pytest.mark.parametrize("value", [None, 1, 50])
def test_optional_interval_accepts_none_and_one_and_above(value):
    assert check_optional_interval("n", value) is None


@pytest.mark.parametrize("value", [True, "1", None, [1.0]])
def test_positive_rejects_non_numbers(value):
    expect_error(check_positive, "n must be a positive number", "n", value)


@pytest.mark.parametrize("value", [0, 0.0, -1e-300, -2, math.inf, math.nan])
def test_positive_rejects_zero_negative_and_non_finite(value):
    expect_error(check_positive, "n must be finite and > 0", "n", value)


@pytest.mark.parametrize("value", [5e-324, 1, 2.5, 1e308])
def test_positive_accepts_finite_positive_numbers_as_floats(value):
    result = check_positive("n", value)
    assert type(result) is float and result == value


@pytest.mark.parametrize(
    "value", [math.nan, math.inf, -math.inf, True, "1", None]
)
def test_finite_rejects_non_finite_and_non_numbers(value):
    expect_error(check_finite, "n must be a finite number", "n", value)


@pytest.mark.parametrize("value", [-2.5, 0, 7, -1e308])
def test_finite_accepts_finite_numbers_as_floats(value):
    result = check_finite("n", value)
    assert type(result) is float and result == value


@pytest.mark.parametrize(
    "value", [0, 0.0, -0.5, 1.0 + 1e-12, 1.5, 2, math.nan, True, "0.5"]
)
def test_rate_rejects_values_outside_zero_one(value):
    expect_error(check_rate, "n must be a number in (0, 1]", "n", value)


@pytest.mark.parametrize("value", [1, 1.0, 0.5, 1e-12])
def test_rate_accepts_the_half_open_interval_up_to_one(value):
    result = check_rate("n", value)
    assert type(result) is float and result == value
