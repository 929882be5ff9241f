"""Sequence-to-sequence IK: a Transformer encoder from end-effector paths to joint paths."""

from torchik.seq2seq.data import (
    SequenceDataset,
    make_sequence_dataset,
    revolute_limits,
)
from torchik.seq2seq.model import (
    ModelEmbedding,
    SequenceIK,
    SequenceIKConfig,
    angle_to_direction,
    direction_to_angle,
    sinusoidal_encoding,
)
from torchik.seq2seq.training import (
    SequenceTrainConfig,
    SequenceTrainResult,
    evaluate_sequence_model,
    train_sequence_model,
)

__all__ = [
    "angle_to_direction",
    "direction_to_angle",
    "evaluate_sequence_model",
    "make_sequence_dataset",
    "ModelEmbedding",
    "revolute_limits",
    "SequenceDataset",
    "SequenceIK",
    "SequenceIKConfig",
    "SequenceTrainConfig",
    "SequenceTrainResult",
    "sinusoidal_encoding",
    "train_sequence_model",
]
