"""Robot descriptions: URDF and MJCF text -> plain dataclasses (:class:`URDFModel`), the
visuals of a URDF, the robot files bundled with torchik, and the default end-link rule.
"""

from torchik.description.bundled import (
    BUNDLED,
    END_LINKS,
    RAIL_ARM_LENGTHS,
    RAIL_ARM_PRIOR_STD,
    bundled_urdf,
    list_robots,
    planar_arm_urdf,
    rail_arm_urdf,
)
from torchik.description.end_link import (
    TOOL_FRAME,
    default_end_link,
)
from torchik.description.mjcf import (
    FREE_JOINT_OPTIONS,
    MJCFError,
    MJCFWarning,
    is_mjcf,
    mjcf_names,
    parse_mjcf,
    qpos_index,
)
from torchik.description.reading import (
    MAX_URDF_BYTES,
    URDFError,
)
from torchik.description.urdf import (
    Joint,
    Mimic,
    Origin,
    URDFModel,
    URDFWarning,
    parse_urdf,
)
from torchik.description.visuals import (
    Visual,
    read_visuals,
)

__all__ = [
    "BUNDLED",
    "bundled_urdf",
    "default_end_link",
    "END_LINKS",
    "FREE_JOINT_OPTIONS",
    "Joint",
    "list_robots",
    "MAX_URDF_BYTES",
    "Mimic",
    "MJCFError",
    "MJCFWarning",
    "is_mjcf",
    "mjcf_names",
    "Origin",
    "parse_mjcf",
    "parse_urdf",
    "planar_arm_urdf",
    "qpos_index",
    "RAIL_ARM_LENGTHS",
    "RAIL_ARM_PRIOR_STD",
    "rail_arm_urdf",
    "TOOL_FRAME",
    "read_visuals",
    "URDFError",
    "URDFModel",
    "URDFWarning",
    "Visual",
]
