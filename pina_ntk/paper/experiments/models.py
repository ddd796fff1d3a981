"""The network of the paper's experiments and the box it scales from."""

import torch

from ...core.checks import check_int, check_positive


class ScaledMLP(torch.nn.Module):
    """
    A tanh multilayer perceptron on inputs mapped affinely from a box
    ``[lower, upper]`` onto ``[-1, 1]``, optionally through a random Fourier
    feature embedding.

    With ``fourier_features = m > 0`` the scaled input ``z`` is first mapped
    to ``[cos(z B), sin(z B)]`` with a fixed (not trained) ``B`` of i.i.d.
    ``N(0, fourier_scale^2)`` entries, ``(len(lower), m)``, drawn from torch's
    global generator (Tancik et al. 2020; Wang, Wang & Perdikaris 2021).
    ``fourier_features=0`` is the plain MLP of the paper.

    Weights use Xavier-normal initialisation and biases start at zero, as in
    Wang, Yu & Perdikaris.

    :param list lower: Lower corner of the input box, one value per input.
    :param list upper: Upper corner of the input box.
    :param int output_dimensions: Number of outputs.
    :param int width: Neurons per hidden layer.
    :param int depth: Number of hidden layers.
    :param int fourier_features: ``m``, the number of random frequencies
        (``0``: no embedding). Default ``0``.
    :param float fourier_scale: Standard deviation of the frequencies.
        Default ``1.0``.
    :raises ValueError: If a size is not a positive integer, the box is
        empty or ``fourier_scale`` is not positive.

    :Example:
        >>> net = ScaledMLP([0.0, 0.0], [1.0, 1.0], 1, width=64, depth=3)
        >>> net(torch.rand(5, 2)).shape
        torch.Size([5, 1])
        >>> ScaledMLP([0.0], [1.0], 1, 8, 2, fourier_features=16)(
        ...     torch.rand(3, 1)).shape
        torch.Size([3, 1])
    """

    def __init__(
        self,
        lower,
        upper,
        output_dimensions,
        width,
        depth,
        fourier_features=0,
        fourier_scale=1.0,
    ):
        super().__init__()
        check_int("output_dimensions", output_dimensions, 1)
        check_int("width", width, 1)
        check_int("depth", depth, 1)
        check_int("fourier_features", fourier_features, 0)
        check_positive("fourier_scale", fourier_scale)
        lower = torch.as_tensor(lower, dtype=torch.get_default_dtype())
        upper = torch.as_tensor(upper, dtype=torch.get_default_dtype())
        if lower.shape != upper.shape or not bool((upper > lower).all()):
            raise ValueError(
                f"need lower < upper componentwise, got {lower} and {upper}."
            )
        self.register_buffer("centre", (upper + lower) / 2)
        self.register_buffer("half_width", (upper - lower) / 2)
        n_inputs = len(lower)
        frequencies = None
        if fourier_features:
            frequencies = fourier_scale * torch.randn(
                n_inputs, fourier_features
            )
            n_inputs = 2 * fourier_features
        # a buffer (saved, moved with the module), None without embedding
        self.register_buffer("frequencies", frequencies)
        sizes = [n_inputs] + [width] * depth + [output_dimensions]
        layers = []
        for i, (n_in, n_out) in enumerate(zip(sizes[:-1], sizes[1:])):
            linear = torch.nn.Linear(n_in, n_out)
            torch.nn.init.xavier_normal_(linear.weight)
            torch.nn.init.zeros_(linear.bias)
            layers.append(linear)
            if i < depth:
                layers.append(torch.nn.Tanh())
        self.layers = torch.nn.Sequential(*layers)

    def forward(self, x):
        """
        :param torch.Tensor x: Inputs, ``(n, len(lower))``.
        :return: Outputs, ``(n, output_dimensions)``.
        :rtype: torch.Tensor
        """
        x = torch.Tensor.as_subclass(x, torch.Tensor)
        z = (x - self.centre) / self.half_width
        if self.frequencies is not None:
            z = z @ self.frequencies
            z = torch.cat([torch.cos(z), torch.sin(z)], dim=-1)
        return self.layers(z)


def input_box(problem):
    """
    The bounding box of a problem's inputs, in ``input_variables`` order.

    :param problem: A PINA spatial (and possibly time-dependent) problem.
    :return: ``(lower, upper)`` lists.
    :rtype: tuple[list, list]
    """
    ranges = {}
    for domain in (problem.spatial_domain, problem.temporal_domain):
        for var, (low, high) in domain.range.items():
            ranges[var] = (float(low), float(high))
    lower = [ranges[v][0] for v in problem.input_variables]
    upper = [ranges[v][1] for v in problem.input_variables]
    return lower, upper
