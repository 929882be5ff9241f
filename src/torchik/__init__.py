"""torchik: batched, differentiable robot kinematics and learned inverse kinematics."""
