"""What the paper's experiments write and measure: summaries, figures and
``metrics.json``, evaluation grids, the relative error."""

import json
from pathlib import Path

import torch
from pina import LabelTensor


def run_summary(run):
    """
    The JSON-serialisable numbers of one trained PINN.

    :param TrainResult run: The run.
    :return: Wall time, final NTK weights and final training loss.
    :rtype: dict
    """
    return {
        "wall_time_s": run.wall_time,
        "final_weights": run.final_weights,
        "final_loss": run.losses[-1] if run.losses else None,
    }


def save_outputs(results, output_dir, figures, dpi=120):
    """
    Write one PNG per figure maker and ``metrics.json`` (the results'
    metrics and ``torch_threads``).

    :param results: The experiment's results (with a ``metrics()`` method).
    :param output_dir: The folder (created if missing).
    :param dict figures: ``{file stem: function(results) -> figure}``.
    :param int dpi: Resolution of the PNGs.
    :return: The written paths.
    :rtype: list[pathlib.Path]
    """
    import matplotlib.pyplot as plt

    folder = Path(output_dir)
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for stem, make in figures.items():
        fig = make(results)
        path = folder / f"{stem}.png"
        fig.savefig(path, dpi=dpi)
        plt.close(fig)
        written.append(path)
    metrics = results.metrics()
    # the threads the PINNs trained with: wall times depend on them
    metrics["torch_threads"] = torch.get_num_threads()
    path = folder / "metrics.json"
    path.write_text(json.dumps(metrics, indent=2))
    written.append(path)
    return written


def grid_points(labels, axes):
    """
    A tensor-product grid as a ``LabelTensor``.

    :param list labels: Variable names, one per axis.
    :param list axes: 1-D tensors of grid values, one per label.
    :return: ``(prod(len(axis)), len(labels))`` points, first axis slowest.
    :rtype: LabelTensor
    """
    mesh = torch.meshgrid(*axes, indexing="ij")
    flat = torch.stack([m.reshape(-1) for m in mesh], dim=-1)
    return LabelTensor(flat, labels=list(labels))


def relative_l2(prediction, reference):
    """
    ``||prediction - reference|| / ||reference||`` over all entries.

    :param torch.Tensor prediction: Predicted values.
    :param torch.Tensor reference: Reference values, same shape.
    :return: The relative error.
    :rtype: float
    :raises ValueError: On a shape mismatch or a zero reference.
    """
    prediction = torch.as_tensor(prediction, dtype=torch.float64)
    reference = torch.as_tensor(reference, dtype=torch.float64)
    if prediction.shape != reference.shape:
        raise ValueError(
            f"shapes differ: prediction {tuple(prediction.shape)}, reference "
            f"{tuple(reference.shape)}."
        )
    norm = torch.linalg.vector_norm(reference)
    if not norm > 0:
        raise ValueError("the reference is zero: relative error undefined.")
    return float(torch.linalg.vector_norm(prediction - reference) / norm)


def relative_error_fn(points, reference):
    """
    The relative L2 error of a solver on fixed points, as a function.

    :param LabelTensor points: Inputs labelled like the problem's.
    :param torch.Tensor reference: Reference outputs at ``points``.
    :return: ``solver -> float`` (puts the solver in evaluation mode).
    :rtype: callable
    """

    def error(solver):
        solver.eval()
        with torch.no_grad():
            out = solver(points.to(solver.device))
        prediction = torch.Tensor.as_subclass(out, torch.Tensor).cpu()
        return relative_l2(prediction.reshape(reference.shape), reference)

    return error
