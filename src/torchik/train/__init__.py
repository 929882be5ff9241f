"""Training: one loop for every learned model (resumable checkpoints, validation, EMA,
mixed precision, DDP), its budget helpers and progress log, and fine-tuning to a changed robot.

Multi-process training helpers are :mod:`torchik.train.distributed`.
"""

from torchik.train import distributed as distributed
from torchik.train.adapt import (
    FINETUNE_CONFIG,
    CalibrationResult,
    calibrate,
    family_dataset,
    finetune,
    perturbed_robot,
    with_origins,
)
from torchik.train.budget import (
    steps_for_minutes,
    steps_per_second,
)
from torchik.train.engine import (
    EMA,
    PRECISIONS,
    TrainConfig,
    lr_factor,
)
from torchik.train.loop import (
    TrainingInterrupted,
    TrainResult,
    train,
    validate,
)
from torchik.train.progress import (
    Progress,
    read_log,
    write_log,
)

__all__ = [
    "calibrate",
    "CalibrationResult",
    "distributed",
    "EMA",
    "family_dataset",
    "finetune",
    "FINETUNE_CONFIG",
    "lr_factor",
    "perturbed_robot",
    "PRECISIONS",
    "Progress",
    "read_log",
    "steps_for_minutes",
    "steps_per_second",
    "train",
    "TrainConfig",
    "TrainingInterrupted",
    "TrainResult",
    "validate",
    "with_origins",
    "write_log",
]
