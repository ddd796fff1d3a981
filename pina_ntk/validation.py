"""Argument checks shared by the public classes (clear, named errors)."""


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
