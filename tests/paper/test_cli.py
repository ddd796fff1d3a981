"""The ``pina-ntk`` command line."""

import json
import math
import subprocess
import sys

import pytest

from pina_ntk.paper.cli import build_parser, main
from pina_ntk.paper.problems import QTensorProblem, WaveProblem


def read_metrics(folder):
    return json.loads((folder / "metrics.json").read_text())


def table_rows(out):
    """``{label: [cells]}`` of the Markdown table the command prints."""
    rows = {}
    for line in out.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("| ") and not cells[0].startswith("---"):
            rows[cells[0]] = cells[1:]
    return rows


def assert_mean_reduction_identity(weights, points):
    """
    ``sum_c n_c / w_c = sum_c n_c`` for weights ``w_c = mean diag(K) /
    mean diag(K_cc)``, whatever the kernel: ``n_c / w_c = Tr(K_cc) /
    mean diag(K)``, which sums to ``n``. Here every condition has as many
    residual entries per point, so the points stand for ``n_c``.
    """
    assert set(weights) == set(points)
    total = sum(points[c] / weights[c] for c in points)
    # float32 weights: rounding near 1e-7 per term
    assert total == pytest.approx(sum(points.values()), rel=1e-5)


def test_wave_quick_run_writes_figures_and_metrics(tmp_path, capsys):
    out = tmp_path / "wave"
    status = main(
        [
            "wave",
            "--quick",
            "--output-dir",
            str(out),
            "--weighting",
            "none",
            "sketch",
            "--points",
            "pde=40",
            "--seed",
            "3",
        ]
    )
    assert status == 0
    assert (out / "weights.png").stat().st_size > 0
    assert (out / "solutions.png").stat().st_size > 0
    metrics = read_metrics(out)
    assert metrics["experiment"] == "wave"
    assert set(metrics["results"]) == {"none", "sketch"}
    settings = metrics["settings"]
    assert settings["points"]["pde"] == 40 and settings["seed"] == 3
    for name, result in metrics["results"].items():
        assert (
            math.isfinite(result["relative_l2"]) and result["wall_time_s"] > 0
        )
    assert metrics["results"]["none"]["final_weights"] == {}
    assert set(settings["points"]) == set(WaveProblem.PAPER_POINTS)
    # the sketch's weights are NTK weights of the mean reduction (a
    # time-dependent problem: no gradient band), on the points asked for
    assert_mean_reduction_identity(
        metrics["results"]["sketch"]["final_weights"], settings["points"]
    )
    captured = capsys.readouterr()
    # the settings first, each weighting as the call that builds it
    head = captured.out.splitlines()[:8]
    assert head[0].startswith("pina-ntk wave settings")
    assert any("SketchNTKWeighting(" in line for line in head)
    points = ", ".join(f"{c}={n}" for c, n in settings["points"].items())
    assert any(
        line.split()[:1] == ["points"] and points in line for line in head
    )
    # the printed table holds the numbers of metrics.json, row by row
    rows = table_rows(captured.out)
    labels = {"vanilla PINN": "none", "sketch-NTK PINN": "sketch"}
    assert set(rows) == {"PINN", *labels}  # the header and one row each
    for label, name in labels.items():
        result = metrics["results"][name]
        assert rows[label] == [
            f"{result['relative_l2']:.3e}",
            f"{result['wall_time_s']:.1f}",
        ]
    steps = settings["steps"]
    assert f"{steps}/{steps}" in captured.err  # the progress bar


def test_qtensor_quick_run_compares_with_the_fem(tmp_path, monkeypatch, capsys):
    pytest.importorskip("skfem")
    import numpy as np

    monkeypatch.setenv("PINA_NTK_CACHE", str(tmp_path / "cache"))
    out = tmp_path / "qtensor"
    status = main(
        [
            "qtensor",
            "--quick",
            "--output-dir",
            str(out),
            "--no-progress",
            "--estimator",
            "parameter",
            "--fem-cells",
            "8",
        ]
    )
    assert status == 0
    assert (out / "directors.png").stat().st_size > 0
    metrics = read_metrics(out)
    assert metrics["settings"]["fem_cells"] == 8
    assert metrics["settings"]["estimator"] == "parameter"
    for result in metrics["results"].values():
        errors = result["relative_l2_vs_fem"]
        assert set(errors) == {"0.5", "2.0"}
        assert all(math.isfinite(e) and e > 0 for e in errors.values())
    settings = metrics["settings"]
    assert set(settings["points"]) == set(QTensorProblem.PAPER_POINTS)
    # two outputs: two residual entries per point in every condition
    assert_mean_reduction_identity(
        metrics["results"]["sketch"]["final_weights"], settings["points"]
    )
    # the printed table holds the numbers of metrics.json, row by row
    rows = table_rows(capsys.readouterr().out)
    labels = {"PINN": "none", "NTK-PINN": "sketch"}
    assert set(rows) == {"model", "FEM (reference)", *labels}
    for label, name in labels.items():
        result = metrics["results"][name]
        errors = result["relative_l2_vs_fem"]
        assert rows[label] == [
            f"{errors['0.5']:.3e}",
            f"{errors['2.0']:.3e}",
            f"{result['wall_time_s']:.1f}",
        ]
    assert rows["FEM (reference)"][-1] == f"{metrics['fem_wall_time_s']:.1f}"
    # the cached FEM solution is the one asked for: P2 on 8 x 8 cells of
    # the square, (2 * 8 + 1)^2 nodes, a step of 0.05 up to T = 2
    [cached] = (tmp_path / "cache").glob("qtensor_fem_*.npz")
    fem = np.load(cached)
    assert (settings["fem_degree"], settings["fem_time_step"]) == (2, 0.05)
    assert np.allclose(fem["step_times"], 0.05 * np.arange(41))
    assert fem["values"].shape == (len(fem["times"]), 2, (2 * 8 + 1) ** 2)


@pytest.mark.parametrize(
    "argv, message",
    [
        (["wave", "--steps", "0"], "argument --steps"),
        (["wave", "--steps", "many"], "argument --steps"),
        (["wave", "--width", "-4"], "argument --width"),
        (["wave", "--lr", "nan"], "argument --lr"),
        (["wave", "--alpha", "2"], "argument --alpha"),
        (["wave", "--weighting", "ntk"], "argument --weighting"),
        (["wave", "--estimator", "exact"], "argument --estimator"),
        (["wave", "--points", "pde"], "argument --points"),
        (["wave", "--points", "top=10"], "unknown condition 'top'"),
        (["qtensor", "--points", "initial=0"], "argument --points"),
        (["qtensor", "--fem-degree", "3"], "argument --fem-degree"),
        (["wave", "--quick", "--full-size"], "not allowed with"),
        (["wave", "--balanced-probe", "yes"], "unrecognized arguments"),
        (["wave", "--sample-every", "0"], "argument --sample-every"),
        (["heat"], "invalid choice"),
        ([], "required"),
    ],
)
def test_bad_flags_give_argparse_errors(argv, message, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "error:" in err and message in err
    assert "Traceback" not in err


def test_presets_and_overrides():
    parser = build_parser()
    from pina_ntk.paper.cli import _settings

    args = parser.parse_args(["wave", "--full-size", "--steps", "1000"])
    settings = _settings(args, parser)
    assert (settings.width, settings.depth, settings.steps) == (500, 3, 1000)
    args = parser.parse_args(["wave"])
    assert _settings(args, parser).steps > 1000
    args = parser.parse_args(["qtensor", "--weighting", "sketch", "sketch"])
    assert _settings(args, parser).weightings == ("sketch",)
    assert _settings(args, parser).balanced_probe  # the default
    args = parser.parse_args(["wave", "--no-balanced-probe"])
    assert not _settings(args, parser).balanced_probe
    # the spacing of sketch samples: the weighting's default, or the flag
    from pina_ntk import SketchNTKWeighting
    from pina_ntk.paper.experiments.settings import make_weighting

    default = SketchNTKWeighting().sample_every_n_steps
    args = parser.parse_args(["wave"])
    settings = _settings(args, parser)
    assert settings.sample_every == default == 10
    assert make_weighting("sketch", settings).sample_every_n_steps == default
    args = parser.parse_args(["qtensor", "--sample-every", "3"])
    settings = _settings(args, parser)
    assert make_weighting("sketch", settings).sample_every_n_steps == 3


#: ``WaveSettings()`` and ``QTensorSettings()`` before the command took the
#: weightings' defaults (what ``pina-ntk wave`` and ``pina-ntk qtensor``
#: trained), and the arguments ``make_weighting`` built the sketch from.
EARLIER_DEFAULTS = {
    "wave": {
        "steps": 10000,
        "width": 128,
        "depth": 3,
        "fourier_features": 64,
        "fourier_scale": 1.0,
        "lr": 0.002,
        "lr_decay": 0.75,
        "lr_decay_steps": 1000,
        "points": {
            "pde": 300,
            "initial_value": 100,
            "initial_velocity": 300,
            "left": 100,
            "right": 100,
        },
        "resample_every": 1,
        "weightings": ["none", "exact", "sketch"],
        "estimator": "parameter",
        "balanced_probe": True,
        "alpha": 0.001,
        "warmup_samples": 32,
        "exact_every": 500,
        "sample_every": 10,
        "safeguard": "none",
        "seed": 0,
        "accelerator": "cpu",
        "grid": 101,
    },
    "qtensor": {
        "steps": 10000,
        "width": 128,
        "depth": 3,
        "fourier_features": 64,
        "fourier_scale": 1.0,
        "lr": 0.002,
        "lr_decay": 0.75,
        "lr_decay_steps": 1000,
        "points": {
            "pde": 300,
            "initial": 300,
            "left": 10,
            "right": 10,
            "bottom": 10,
            "top": 10,
        },
        "resample_every": 1,
        "weightings": ["none", "sketch"],
        "estimator": "parameter",
        "balanced_probe": True,
        "alpha": 0.001,
        "warmup_samples": 32,
        "exact_every": 100,
        "sample_every": 10,
        "safeguard": "default",
        "seed": 0,
        "accelerator": "cpu",
        "grid": 81,
        "fem_cells": 32,
        "fem_degree": 2,
        "fem_time_step": 0.005,
        "error_times": [0.5, 2.0],
    },
}
EARLIER_SKETCH = {
    "wave": dict(
        alpha=0.001,
        sample_every_n_steps=10,
        warmup_samples=32,
        estimator="parameter",
        balanced_probe=True,
        safeguard=None,
        seed=0,
        evaluation_chunk_size=None,
    ),
    "qtensor": dict(
        alpha=0.001,
        sample_every_n_steps=10,
        warmup_samples=32,
        estimator="parameter",
        balanced_probe=True,
        safeguard="default",
        seed=0,
        evaluation_chunk_size=None,
    ),
}


def _sketch_arguments(weighting):
    # the constructor arguments a SketchNTKWeighting was built with
    found = {name: getattr(weighting, name) for name in EARLIER_SKETCH["wave"]}
    if found["safeguard"] is not None:
        found["safeguard"] = "default"
    return found


@pytest.mark.parametrize("experiment", ["wave", "qtensor"])
def test_paper_settings_are_the_earlier_defaults(experiment):
    from pina_ntk.paper.cli import _settings
    from pina_ntk.paper.experiments.settings import make_weighting

    parser = build_parser()
    args = parser.parse_args([experiment, "--paper-settings"])
    settings = _settings(args, parser)
    assert settings.as_dict() == EARLIER_DEFAULTS[experiment]
    sketch = make_weighting("sketch", settings)
    assert _sketch_arguments(sketch) == EARLIER_SKETCH[experiment]
    # the run the paper-settings flag must reproduce bitwise
    args = parser.parse_args(
        [experiment, "--paper-settings", "--weighting", "sketch", "--seed", "0"]
    )
    expected = {**EARLIER_DEFAULTS[experiment], "weightings": ["sketch"]}
    assert _settings(args, parser).as_dict() == expected
    # printing the settings builds the weightings: no random draw that
    # would shift the run
    import torch

    from pina_ntk.paper.cli import settings_summary

    state = torch.random.get_rng_state()
    summary = settings_summary(experiment, settings, 1, paper_settings=True)
    assert torch.equal(state, torch.random.get_rng_state())
    assert "estimator='parameter'" in summary
    # flags still win, presets still apply
    args = parser.parse_args(
        [experiment, "--paper-settings", "--quick", "--estimator", "predictor"]
    )
    settings = _settings(args, parser)
    assert settings.estimator == "predictor" and settings.steps == 20


@pytest.mark.parametrize("experiment", ["wave", "qtensor"])
def test_the_command_trains_the_weightings_defaults(experiment):
    import inspect

    from pina_ntk import NTKWeighting, SketchNTKWeighting
    from pina_ntk.paper.cli import _settings, weighting_call
    from pina_ntk.paper.experiments.settings import make_weighting

    parser = build_parser()
    settings = _settings(parser.parse_args([experiment]), parser)
    for kind, cls, spaced in (
        ("sketch", SketchNTKWeighting, set()),
        ("exact", NTKWeighting, {"update_every_n_steps"}),
    ):
        weighting = make_weighting(kind, settings)
        defaults = inspect.signature(cls).parameters
        differing = {
            name
            for name, parameter in defaults.items()
            if name != "safeguard"
            and getattr(weighting, name) != parameter.default
        }
        # seeded runs; the warm start's evaluation in one piece (memory
        # only); exact updates spaced by --exact-every
        assert differing <= {"seed", "evaluation_chunk_size"} | spaced
        assert weighting.safeguard is not None  # the default safeguard
        assert weighting_call(weighting).startswith(cls.__name__ + "(")
        assert "safeguard" not in weighting_call(weighting)
    sketch = make_weighting("sketch", settings)
    assert sketch.estimator == SketchNTKWeighting().estimator == "predictor"


def test_module_entry_point_reports_errors_without_traceback():
    result = subprocess.run(
        [sys.executable, "-m", "pina_ntk", "wave", "--steps", "-1"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2
    assert "error: argument --steps" in result.stderr
    assert "Traceback" not in result.stderr


# ------------------------------------------------ the shared experiment code
def test_scaled_mlp_maps_the_box_onto_the_unit_cube():
    import torch

    from pina_ntk.paper.experiments.models import ScaledMLP

    net = ScaledMLP([-2.0, 0.0], [2.0, 1.0], 1, width=4, depth=1)
    seen = []
    net.layers[0].register_forward_hook(lambda m, i, o: seen.append(i[0]))
    net(torch.tensor([[-2.0, 0.0], [2.0, 1.0], [0.0, 0.5]]))
    assert torch.allclose(
        seen[0], torch.tensor([[-1.0, -1.0], [1.0, 1.0], [0.0, 0.0]])
    )
    assert torch.count_nonzero(net.layers[0].bias) == 0
    with pytest.raises(ValueError, match="width"):
        ScaledMLP([0.0], [1.0], 1, width=0, depth=1)
    with pytest.raises(ValueError, match="lower < upper"):
        ScaledMLP([1.0], [1.0], 1, width=3, depth=1)


def test_scaled_mlp_fourier_embedding_is_fixed_and_saved():
    import torch

    from pina_ntk.paper.experiments.models import ScaledMLP

    torch.manual_seed(3)
    net = ScaledMLP([0.0, 0.0], [2.0, 1.0], 1, 5, 2, 4, fourier_scale=2.0)
    seen = []
    net.layers[0].register_forward_hook(lambda m, i, o: seen.append(i[0]))
    x = torch.tensor([[0.5, 0.25], [2.0, 1.0]])
    net(x)
    z = (x - torch.tensor([1.0, 0.5])) / torch.tensor([1.0, 0.5])
    projected = z @ net.frequencies
    expected = torch.cat([projected.cos(), projected.sin()], dim=-1)
    assert torch.allclose(seen[0], expected)
    # frozen: a buffer in the state dict, not a trainable parameter
    assert "frequencies" in net.state_dict()
    assert all(p.shape != (2, 4) for p in net.parameters())
    torch.manual_seed(3)
    again = ScaledMLP([0.0, 0.0], [2.0, 1.0], 1, 5, 2, 4, fourier_scale=2.0)
    assert torch.equal(again.frequencies, net.frequencies)
    with pytest.raises(ValueError, match="fourier_scale"):
        ScaledMLP([0.0], [1.0], 1, 3, 1, 4, fourier_scale=0.0)
    with pytest.raises(ValueError, match="fourier_features"):
        ScaledMLP([0.0], [1.0], 1, 3, 1, -1)


def test_relative_l2_and_weighting_choices():
    import torch

    from pina_ntk.paper.experiments.settings import make_weighting
    from pina_ntk.paper.experiments.outputs import relative_l2

    assert relative_l2(torch.tensor([3.0, 4.0]), torch.tensor([0.0, 5.0])) == (
        pytest.approx(10.0**0.5 / 5.0)
    )
    with pytest.raises(ValueError, match="shapes"):
        relative_l2(torch.zeros(2), torch.ones(3))
    with pytest.raises(ValueError, match="zero"):
        relative_l2(torch.ones(2), torch.zeros(2))
    from pina_ntk import SketchNTKWeighting
    from pina_ntk.paper.experiments.wave import WaveSettings

    settings = WaveSettings(warmup_samples=7, estimator="parameter")
    assert make_weighting("none", settings) is None
    sketch = make_weighting("sketch", settings)
    assert isinstance(sketch, SketchNTKWeighting)
    assert (sketch.warmup_samples, sketch.estimator) == (7, "parameter")
    assert sketch.balanced_probe and not sketch.uses_probe_scales
    settings = WaveSettings(estimator="predictor", balanced_probe=False)
    assert not make_weighting("sketch", settings).uses_probe_scales
    settings = WaveSettings(estimator="predictor")
    assert make_weighting("sketch", settings).uses_probe_scales
    with pytest.raises(ValueError, match="weighting"):
        make_weighting("uniform", settings)


def test_director_picture_is_the_eigen_decomposition():
    import numpy as np

    from pina_ntk.paper.experiments.qtensor import director_picture

    rng = np.random.default_rng(1)
    q1, q2 = rng.normal(size=(2, 20))
    light, vx, vy = director_picture(q1, q2)
    for i in range(20):
        matrix = np.array([[q1[i], q2[i]], [q2[i], -q1[i]]])
        values, vectors = np.linalg.eigh(matrix)
        assert np.isclose(light[i], abs(values[1] * vectors[0, 1]))
        # the director is defined up to sign
        assert np.isclose(abs(vx[i] * vectors[0, 1] + vy[i] * vectors[1, 1]), 1)


@pytest.mark.parametrize(
    "kwargs, name",
    [
        ({"steps": 0}, "steps"),
        ({"lr": -1e-3}, "lr"),
        ({"alpha": 2.0}, "alpha"),
        ({"lr_decay": 0.0}, "lr_decay"),
        ({"weightings": ("none", "ntk")}, "weightings"),
        ({"weightings": ()}, "weightings"),
        ({"estimator": "hutchinson"}, "estimator"),
        ({"balanced_probe": "yes"}, "balanced_probe"),
        ({"safeguard": "off"}, "safeguard"),
        ({"points": {"interior": 10}}, "points"),
        ({"points": {"pde": 0}}, "points"),
        ({"resample_every": -1}, "resample_every"),
        ({"sample_every": 0}, "sample_every"),
    ],
)
def test_experiment_settings_reject_bad_values(kwargs, name):
    from pina_ntk.paper.experiments.wave import WaveSettings

    with pytest.raises(ValueError, match=name):
        WaveSettings(**kwargs)


def test_qtensor_settings_check_the_reference_and_error_times():
    from pina_ntk.paper.experiments.qtensor import QTensorSettings
    from pina_ntk.paper.problems import QTensorProblem

    with pytest.raises(ValueError, match="error_times"):
        QTensorSettings(error_times=(0.5, 3.0))
    with pytest.raises(ValueError, match="fem_degree"):
        QTensorSettings(fem_degree=3)
    settings = QTensorSettings(points={"pde": 50})
    # a partial points dict overrides only the conditions it names
    assert settings.points == {**QTensorProblem.PAPER_POINTS, "pde": 50}


def test_console_script_is_installed():
    # the script pip wrote next to this interpreter runs the command
    import shutil
    from pathlib import Path

    bin_dir = Path(sys.executable).parent
    script = shutil.which("pina-ntk", path=str(bin_dir)) or shutil.which(
        "pina-ntk"
    )
    assert script is not None, "pina-ntk is not installed"
    result = subprocess.run(
        [script, "wave", "--help"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert "--paper-settings" in result.stdout


def test_help_shows_each_experiments_defaults(capsys):
    with pytest.raises(SystemExit):
        main(["qtensor", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "NTK updates (default: 100)" in text  # qtensor's
    assert "(default: 32)" in text  # --fem-cells
    with pytest.raises(SystemExit):
        main(["wave", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "NTK updates (default: 500)" in text
    assert "(default: none exact sketch)" in text
    assert "estimator (default: predictor)" in text
    assert "(estimator=parameter, safeguard=none)" in text  # --paper-settings


def test_each_finished_pinn_is_kept_when_interrupted(tmp_path, monkeypatch):
    import json

    from pina_ntk.paper.experiments import training

    original = training.train_pinn
    calls = []

    def interrupted_second(problem, weighting, settings, progress=False):
        calls.append(weighting)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return original(problem, weighting, settings, progress)

    monkeypatch.setattr(training, "train_pinn", interrupted_second)
    out = tmp_path / "run"
    status = main(
        ["wave", "--quick", "--no-progress", "--output-dir", str(out)]
    )
    assert status == 130
    metrics = json.loads((out / "metrics.json").read_text())
    assert list(metrics["results"]) == ["none"]  # the first PINN finished
    assert (out / "solutions.png").exists()


def test_threads_default_to_one_and_are_recorded(tmp_path):
    import json

    import torch

    parser = build_parser()
    assert parser.parse_args(["wave"]).threads == 1
    out = tmp_path / "run"
    assert (
        main(
            [
                "wave",
                "--quick",
                "--weighting",
                "none",
                "--no-progress",
                "--output-dir",
                str(out),
            ]
        )
        == 0
    )
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["torch_threads"] == 1 == torch.get_num_threads()


def test_a_missing_extra_is_named_in_one_line(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "skfem", None)  # as if not installed
    assert main(["qtensor", "--quick"]) == 1
    error = capsys.readouterr().err.strip()
    assert len(error.splitlines()) == 1
    assert "'skfem'" in error and '".[fem]"' in error
