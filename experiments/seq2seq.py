"""The seq2seq representation protocol (Neural IK paper, Section 5.5) on any robot and IKNet.

A small Transformer encoder (:class:`torchik.seq2seq.SequenceIK`) maps an end-effector path of
``length`` positions to the joint angles along it. It is trained with the same seeds, sizes and
data on the raw positions and on the IKNet hypernetwork's embedding of every position (frozen;
optionally also fine-tuned), and on the embedding of an untrained IKNet of the same sizes (a
control: is it the learned representation or just a wider input?). The test error is measured
before training and after every epoch (:func:`torchik.seq2seq.train_sequence_model`).

Example:
    >>> import torch, torchik
    >>> from experiments.small_iknet import train_small_iknet
    >>> robot = torchik.load_robot("snake2", dtype=torch.float64)
    >>> iknet = train_small_iknet(torchik.make_dataset(robot, 256), steps=2).model
    >>> settings = Seq2SeqSettings(train_sequences=8, test_sequences=4, length=5, epochs=1,
    ...     d_model=8, heads=2, layers=1, feedforward=8, seeds=(0,), variants=("raw", "frozen"))
    >>> runs = seq2seq_runs(robot, iknet, settings)
    >>> print(seq2seq_tables(runs, settings.epochs)[0].rows[0]["method"])
    raw positions
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch

from experiments.table import Column, Table, Tables
from torchik.models import IKNet
from torchik.robot import Robot
from torchik.seq2seq import (
    ModelEmbedding,
    SequenceIK,
    SequenceIKConfig,
    SequenceTrainConfig,
    make_sequence_dataset,
    train_sequence_model,
)

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = [
    "VARIANTS",
    "Seq2SeqSettings",
    "VariantRuns",
    "seq2seq_figure",
    "seq2seq_notes",
    "seq2seq_runs",
    "seq2seq_tables",
    "untrained_like",
]

VARIANTS = {
    "raw": "raw positions",
    "frozen": "IKNet embedding (frozen)",
    "control": "untrained IKNet embedding (frozen, control)",
    "tuned": "IKNet embedding (fine-tuned)",
}
"""Short name -> the row name of each input variant, in the tables' order."""


@dataclass(frozen=True)
class Seq2SeqSettings:
    """The protocol's settings (those of ``benchmarks/seq2seq.py``, same names).

    Attributes:
        train_sequences, test_sequences: sequences (test: data seed 1, training: seed 0).
        length: positions per sequence.
        max_move: largest change of a joint along a sequence (rad).
        margin: fraction of each joint range left out at both ends.
        epochs, batch_size, lr, warmup: training (AdamW, warm-up steps then cosine to 5 %).
        d_model, heads, layers, feedforward: the Transformer encoder's sizes.
        seeds: one run per seed and variant (model initialisation and batch order).
        variants: keys of :data:`VARIANTS` to train.
    """

    train_sequences: int = 2000
    test_sequences: int = 300
    length: int = 100
    max_move: float = 1.0
    margin: float = 0.3
    epochs: int = 12
    batch_size: int = 32
    lr: float = 2e-3
    warmup: int = 100
    d_model: int = 64
    heads: int = 4
    layers: int = 2
    feedforward: int = 128
    seeds: tuple[int, ...] = (0, 1)
    variants: tuple[str, ...] = tuple(VARIANTS)

    def __post_init__(self) -> None:
        if unknown := set(self.variants) - set(VARIANTS):
            raise ValueError(f"unknown variants {sorted(unknown)}: choose from {list(VARIANTS)}")

    def model_config(self) -> SequenceIKConfig:
        """The encoder's :class:`~torchik.seq2seq.SequenceIKConfig`."""
        return SequenceIKConfig(
            d_model=self.d_model, heads=self.heads, layers=self.layers,
            feedforward=self.feedforward, max_length=max(512, self.length),
        )  # fmt: skip


@dataclass
class VariantRuns:
    """One input variant's runs, one per seed.

    Attributes:
        histories: per seed, :attr:`torchik.seq2seq.SequenceTrainResult.history`.
        seconds: per seed, the training time (evaluations excluded).
        parameters: parameters the last step updated (a fine-tuned IKNet's unused weight heads
            get no gradient and are not counted).
    """

    histories: list[list[dict[str, float]]]
    seconds: list[float]
    parameters: int = 0

    def curve(self, key: str) -> tuple[list[float], list[float]]:
        """Mean and (population) std over seeds of one history column, per epoch."""
        values = torch.tensor([[row[key] for row in h] for h in self.histories])
        return values.mean(0).tolist(), values.std(0, correction=0).tolist()


def untrained_like(iknet: IKNet) -> IKNet:
    """An IKNet of the same sizes with fresh weights (seed 12345) and the trained one's
    target scaling, in eval mode: the control's embedding."""
    torch.manual_seed(12345)
    untrained = IKNet(iknet.spec, iknet.config)
    with torch.no_grad():
        untrained.target_mean.copy_(iknet.target_mean)
        untrained.target_std.copy_(iknet.target_std)
    return untrained.eval()


def _variants(iknet: IKNet, which: tuple[str, ...]) -> dict[str, dict[str, Any]]:
    """Keyword arguments of SequenceIK per chosen variant; each run embeds with its own copy."""
    untrained = untrained_like(iknet)

    def embed(model: IKNet) -> Callable[[], ModelEmbedding]:
        return lambda: ModelEmbedding(copy.deepcopy(model))

    width = iknet.config.embedding
    kwargs: dict[str, dict[str, Any]] = {
        "raw": {},
        "frozen": {"embed": embed(iknet), "embed_dim": width},
        "control": {"embed": embed(untrained), "embed_dim": width},
        "tuned": {"embed": embed(iknet), "embed_dim": width, "train_embed": True},
    }
    return {VARIANTS[key]: kwargs[key] for key in VARIANTS if key in which}


def seq2seq_runs(
    robot: Robot,
    iknet: IKNet,
    settings: Seq2SeqSettings = Seq2SeqSettings(),  # noqa: B008 (frozen)
    log: Callable[[str], None] | None = None,
) -> dict[str, VariantRuns]:
    """Train the encoder on every variant and seed and record the test errors per epoch.

    Args:
        robot: the robot (float64 for the FK of the errors; the data use the default end link).
        iknet: a trained IKNet of ``robot`` (float32; its embedding is the input).
        settings: the protocol's settings.
        log: called with one line per finished run.

    Returns:
        Row name (see :data:`VARIANTS`) -> its :class:`VariantRuns`.
    """
    s = settings
    data = [make_sequence_dataset(robot, n, s.length, max_move=s.max_move, margin=s.margin,
                                  seed=seed)
            for n, seed in ((s.train_sequences, 0), (s.test_sequences, 1))]  # fmt: skip
    runs: dict[str, VariantRuns] = {}
    for name, kwargs in _variants(iknet.float().eval(), s.variants).items():
        out = runs[name] = VariantRuns([], [])
        for seed in s.seeds:
            config = SequenceTrainConfig(epochs=s.epochs, batch_size=s.batch_size, lr=s.lr,
                                         warmup_steps=s.warmup, seed=seed)  # fmt: skip
            options = {k: v() if callable(v) else v for k, v in kwargs.items()}
            torch.manual_seed(seed)
            model = SequenceIK(robot.dof, s.model_config(), **options)
            result = train_sequence_model(model, data[0], data[1], robot, config)
            out.histories.append(result.history)
            out.seconds.append(result.seconds)
            last = result.history[-1]
            if log is not None:
                log(f"{name}, seed {seed}: {100 * last['test_position_error']:.2f} cm, "
                    f"{last['test_joint_error']:.3f} rad after {s.epochs} epochs, "
                    f"{result.seconds:.0f} s")  # fmt: skip
        used = [p for p in model.trainable_parameters() if p.grad is not None]
        out.parameters = sum(p.numel() for p in used)
    return runs


def _fmt(scale: float, digits: int) -> Callable[[tuple[float, float]], str]:
    return lambda pair: f"{scale * pair[0]:.{digits}f} ± {scale * pair[1]:.{digits}f}"


def _epoch_table(runs: dict[str, VariantRuns], key: str, title: str, scale: float,
                 digits: int) -> Table:  # fmt: skip
    columns = [Column(f"v{i}", name, _fmt(scale, digits)) for i, name in enumerate(runs)]
    table = Table(title, columns)
    curves = [run.curve(key) for run in runs.values()]
    for epoch in range(len(curves[0][0])):
        values: dict[str, Any] = {
            f"v{i}": (mean[epoch], std[epoch]) for i, (mean, std) in enumerate(curves)
        }
        table.add(f"epoch {epoch}", **values)
    return table


def _first_epoch_below(curve: list[float], level: float) -> int | None:
    return next((epoch for epoch, value in enumerate(curve) if value <= level), None)


SUMMARY_NOTES = [
    "Errors are means over seeds of the mean test end-effector distance (FK of the predicted "
    "joints) and of the mean absolute joint error. 'First epoch at the raw model's final "
    "error': the first epoch whose mean test error is at most the raw model's after the last "
    "epoch (— : never), a measure of convergence speed.",
    "Trainable parameters: those the optimiser updated (a frozen embedding has none; a "
    "fine-tuned IKNet adds its hypernetwork, not its unused weight heads). Training time: wall "
    "time per epoch, evaluations excluded, 1 thread on a shared machine (a frozen embedding is "
    "computed once for all sequences, outside this time).",
]
"""The notes under the summary table."""


def _summary_table(runs: dict[str, VariantRuns], epochs: int) -> Table:
    cm = lambda x: f"{100 * x:.2f}"  # noqa: E731
    table = Table("Summary (means over seeds)", [
        Column("parameters", "trainable parameters"),
        Column("final", f"test error after {epochs} epochs (cm)", cm),
        Column("best", "best epoch's test error (cm)", cm),
        Column("joint", f"joint error after {epochs} epochs (rad)", lambda x: f"{x:.3f}"),
        Column("reach", "first epoch at the raw model's final error"),  # None: never
        Column("seconds", "training time per epoch", lambda x: f"{x:.1f} s"),
    ], notes=list(SUMMARY_NOTES))  # fmt: skip
    raw = runs.get(VARIANTS["raw"])
    raw_final = raw.curve("test_position_error")[0][-1] if raw else None
    for name, run in runs.items():
        error = run.curve("test_position_error")[0]
        table.add(
            name, parameters=run.parameters, final=error[-1], best=min(error),
            joint=run.curve("test_joint_error")[0][-1],
            reach=None if raw_final is None else _first_epoch_below(error, raw_final),
            seconds=sum(run.seconds) / len(run.seconds) / epochs,
        )  # fmt: skip
    return table


def seq2seq_tables(runs: dict[str, VariantRuns], epochs: int) -> Tables:
    """The summary, then the test end-effector and joint errors per epoch (mean ± std).

    Args:
        runs: from :func:`seq2seq_runs`.
        epochs: the epochs each run trained.
    """
    return Tables([
        _summary_table(runs, epochs),
        _epoch_table(runs, "test_position_error", "Test end-effector error per epoch (cm)", 100, 2),
        _epoch_table(runs, "test_joint_error", "Test joint error per epoch (rad)", 1, 3),
    ])  # fmt: skip


def seq2seq_notes(robot: Robot, settings: Seq2SeqSettings, what: str) -> list[str]:
    """The protocol in words (a results file's introduction); ``what``: the IKNet's origin."""
    from torchik.ik import default_link

    s, cfg = settings, settings.model_config()
    return [
        f"Embedding: {what}.",
        f"Data: {robot.name} (`{default_link(robot)}`), {s.train_sequences} training and "
        f"{s.test_sequences} test sequences (other seed) of {s.length} positions; each "
        "sequence moves every joint from a random start to a random end at most "
        f"{s.max_move} rad away with a (1 - cos) profile (torchik.seq2seq.make_sequence_dataset, "
        f"margin {s.margin} of each range).",
        f"Model: torchik.seq2seq.SequenceIK, Transformer encoder d_model {cfg.d_model}, "
        f"{cfg.heads} heads, {cfg.layers} pre-norm layers, feed-forward {cfg.feedforward}, no "
        "dropout, sinusoidal positions, no mask; one (cos, sin) per joint, loss = squared "
        "distance to (cos q, sin q). Inputs: raw positions standardised with the training "
        "set's mean and std, or the IKNet embedding of every position (a linear projection to "
        "d_model either way; every other initial weight is the same for one seed).",
        f"Training: AdamW lr {s.lr}, {s.warmup} warm-up steps then cosine decay to 5 %, batch "
        f"{s.batch_size} sequences, grad-norm clip 1, {s.epochs} epochs, seeds "
        f"{', '.join(map(str, s.seeds))} (model initialisation and batch order; the data are "
        "the same for all). 1 torch thread, CPU.",
        "Test error: mean over every step of every test sequence of the distance between the "
        "target and FK (float64) of the predicted joints, and the mean absolute joint error "
        "(wrapped to (-pi, pi]). Epoch 0 is before training. Entries: mean ± std over seeds.",
        "Position-only targets leave the UR5 redundant (6 joints, 3 constraints) and a "
        "regressor of the true joints averages the IK branches it cannot tell apart; hence the "
        f"margin: joints stay in the middle {1 - 2 * s.margin:.0%} of each range, where most "
        "paths have one branch. With margin 0.1 both inputs stalled at 26-28 cm on the UR5 in "
        "development (1 seed, 3000 training sequences, 15 epochs, lr 2e-3: raw 26.3 cm, frozen "
        "IKNet embedding 28.4 cm). The wrist joints move the end effector by a few centimetres "
        "only, so the joint error stays well above zero; the end-effector error is the measure.",
        "Paper (Section 5.5, a Transformer on UR5 sequences of length 100, full-size models on "
        "a GPU): the IKNet representation converges faster and to a lower test error than raw "
        "inputs. The sizes here are reduced to fit a few CPU minutes per model.",
    ]


def seq2seq_figure(runs: dict[str, VariantRuns]) -> Figure:
    """Test errors per epoch of every variant (mean over seeds, band = min..max over seeds)."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(10, 3.8), layout="constrained")
    axes = fig.subplots(1, 2)
    for name, run in runs.items():
        for ax, key, scale in ((axes[0], "test_position_error", 100),
                               (axes[1], "test_joint_error", 1)):  # fmt: skip
            values = torch.tensor([[row[key] for row in h] for h in run.histories]) * scale
            epochs = range(values.shape[1])
            (line,) = ax.plot(epochs, values.mean(0), "o-", ms=3, label=name)
            ax.fill_between(epochs, values.min(0).values, values.max(0).values,
                            color=line.get_color(), alpha=0.2)  # fmt: skip
    axes[0].set(xlabel="epoch", ylabel="test end-effector error (cm)", yscale="log")
    axes[1].set(xlabel="epoch", ylabel="test joint error (rad)")
    axes[0].legend(fontsize=8)
    for ax in axes:
        ax.grid(alpha=0.3)
    return fig
