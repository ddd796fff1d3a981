"""Argument checks shared by the public classes (clear, named errors)."""

import math


def check_int(name, value, minimum):
    """
    Require an integer ``>= minimum`` (``bool`` is not an integer here).

    :param str name: The argument's name, used in the message.
    :param value: The value to check.
    :param int minimum: The smallest accepted value.
    :raises ValueError: If the check fails.
    """
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(
            f"{name} must be an integer >= {minimum}, got {value!r}."
        )


def check_bool(name, value):
    """
    Require ``True`` or ``False``.

    :param str name: The argument's name, used in the message.
    :param value: The value to check.
    :raises ValueError: If the check fails.
    """
    if not isinstance(value, bool):
        raise ValueError(f"{name} must be a bool, got {value!r}.")


def check_choice(name, value, choices):
    """
    Require one of ``choices``.

    :param str name: The argument's name, used in the message.
    :param value: The value to check.
    :param tuple choices: The accepted values.
    :raises ValueError: If the check fails.
    """
    if value not in choices:
        raise ValueError(f"{name} must be one of {choices}, got {value!r}.")


def check_optional_interval(name, value):
    """
    Require ``None`` or an integer ``>= 1`` (a logging interval).

    :param str name: The argument's name, used in the message.
    :param value: The value to check.
    :raises ValueError: If the check fails.
    """
    if value is not None:
        check_int(name, value, 1)


def _is_real(value):
    """Whether ``value`` is a Python real number (``bool`` is not one)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def check_positive(name, value):
    """
    Require a finite real number ``> 0`` (``bool`` is not a number here).

    :param str name: The argument's name, used in the message.
    :param value: The value to check.
    :return: ``value`` as a ``float``.
    :rtype: float
    :raises ValueError: If the check fails.
    """
    if not _is_real(value):
        raise ValueError(f"{name} must be a positive number, got {value!r}.")
    if not 0 < value < math.inf:
        raise ValueError(f"{name} must be finite and > 0, got {value!r}.")
    return float(value)


def check_finite(name, value):
    """
    Require a finite real number (``bool`` is not a number here).

    :param str name: The argument's name, used in the message.
    :param value: The value to check.
    :return: ``value`` as a ``float``.
    :rtype: float
    :raises ValueError: If the check fails.
    """
    if not _is_real(value) or not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number, got {value!r}.")
    return float(value)


def check_rate(name, value):
    """
    Require a real number in ``(0, 1]`` (a rate or a fraction).

    :param str name: The argument's name, used in the message.
    :param value: The value to check.
    :return: ``value`` as a ``float``.
    :rtype: float
    :raises ValueError: If the check fails.
    """
    if not _is_real(value) or not 0 < value <= 1:
        raise ValueError(f"{name} must be a number in (0, 1], got {value!r}.")
    return float(value)
