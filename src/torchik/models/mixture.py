"""Sparsemax and one-dimensional Gaussian mixtures on a joint's range (the output of IKNet).

A joint's range is a :class:`JointDomain`, and it decides how the mixture meets the limits:

* **circular** (continuous joints, and revolute joints whose range spans a full turn, such as
  the ``[-pi, pi]`` joints of UR5 and the snakes): every component is a *wrapped* normal on the
  circle ``[lower, lower + 2 pi)``. The residual ``x - mean`` is taken modulo ``2 pi`` and the
  density sums the images ``r - 2 pi, r, r + 2 pi``; scales are kept below ``pi / 2`` (see
  :func:`scale_range`), where the images left out weigh less than ``1e-7``. Sampling draws a
  normal and wraps it, which is exactly that density. Angles that differ by a turn are one
  solution, so the two ends of ``[-pi, pi]`` are the same configuration, as they should be.
* **limited** (every other joint): every component is a normal *truncated* to
  ``[lower, upper]`` and renormalised by ``Z = Phi(b) - Phi(a)``. Unlike clamping this keeps a
  true density (no point masses at the limits) and unlike a squashing map it keeps the normal's
  shape inside the range. Sampling is by the inverse CDF. IKNet keeps every mean inside the
  limits, so ``a <= 0 <= b`` and ``Z`` is never tiny; the functions here stay finite for means
  outside too (``Z`` is computed from ``log_ndtr`` on the side of the smaller tail).

Mixing weights come from :func:`sparsemax` and can be exactly zero: a zero-weight component
contributes ``log 0 = -inf`` to a ``logsumexp`` and neither a value nor a gradient leaks from it.

Example:
    >>> w = sparsemax(torch.tensor([2.0, 1.5, -1.0]))
    >>> w
    tensor([0.7500, 0.2500, 0.0000])
    >>> dom = JointDomain(-1.0, 1.0, circular=False)
    >>> mixture_log_prob(torch.tensor(0.0), w, torch.tensor([0.0, 0.5, 0.0]),
    ...                  torch.tensor([0.1, 0.1, 0.1]), dom).exp()
    tensor(2.9921)
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor
from torch.special import log_ndtr, ndtr, ndtri

from torchik.geometry.joints import FULL_TURN_TOL, wrap_angle, wrap_into

__all__ = [
    "JointDomain",
    "full_precision",
    "mixture_log_prob",
    "mixture_sample",
    "mixture_sample_within",
    "scale_range",
    "sparsemax",
]

TWO_PI = 2.0 * math.pi
_LOG_SQRT_2PI = 0.5 * math.log(TWO_PI)
_MAX_CIRCULAR_SCALE = math.pi / 2


# ---------------------------------------------------------------------------- sparsemax
class _Sparsemax(torch.autograd.Function):
    """Sparsemax over the last dimension with its closed-form backward."""

    @staticmethod
    def forward(z: Tensor) -> Tensor:
        z_sorted = torch.sort(z, dim=-1, descending=True).values
        k = torch.arange(1, z.shape[-1] + 1, dtype=z.dtype, device=z.device)
        cumsum = z_sorted.cumsum(-1)
        # the support is the k largest entries with 1 + k z_(k) > sum_{i<=k} z_(i); the condition
        # holds for a prefix of the sorted entries and always for the largest one
        # clamp: NaN or +inf logits fail every comparison; they then give NaN weights (and a
        # non-finite loss that the caller sees) rather than an out-of-range index
        support = (1.0 + k * z_sorted > cumsum).sum(-1, keepdim=True).clamp_min(1)
        tau = (cumsum.gather(-1, support - 1) - 1.0) / support.to(z.dtype)
        return torch.clamp(z - tau, min=0.0)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(output)

    @staticmethod
    def backward(ctx, grad: Tensor) -> Tensor:
        (p,) = ctx.saved_tensors
        # the Jacobian is diag(s) - s s^T / |S| with s the support indicator (Martins & Astudillo)
        s = (p > 0).to(grad.dtype)
        mean = (grad * s).sum(-1, keepdim=True) / s.sum(-1, keepdim=True)
        return s * (grad - mean)


def sparsemax(logits: Tensor, dim: int = -1) -> Tensor:
    """The Euclidean projection of ``logits`` onto the probability simplex along ``dim``.

    Like softmax it returns non-negative weights that sum to one, but entries far below the
    largest are exactly zero. Its gradient is exact (closed form).

    Args:
        logits: ``(..., K, ...)`` real scores; ``-inf`` entries get weight zero.
        dim: the dimension of the ``K`` components.

    Returns:
        Weights of the same shape, summing to one along ``dim``.

    Example:
        >>> sparsemax(torch.tensor([0.0, 0.0, 5.0]))
        tensor([0., 0., 1.])
    """
    moved = logits.movedim(dim, -1)
    return _Sparsemax.apply(moved).movedim(-1, dim)


# ---------------------------------------------------------------------------- domains
@dataclass(frozen=True)
class JointDomain:
    """The range of one joint and how a mixture respects it.

    Attributes:
        lower, upper: the joint limits.
        circular: whether values wrap around (a full turn); the mixture then lives on
            ``[lower, lower + 2 pi)``.
    """

    lower: float
    upper: float
    circular: bool

    def __post_init__(self) -> None:
        if not self.upper > self.lower:
            raise ValueError(f"upper {self.upper} must exceed lower {self.lower}")

    @classmethod
    def from_limits(cls, lower: float, upper: float, continuous: bool = False) -> JointDomain:
        """A domain that is circular for continuous joints and ranges of a full turn or more."""
        full_turn = upper - lower >= TWO_PI - FULL_TURN_TOL
        return cls(float(lower), float(upper), bool(continuous or full_turn))

    @property
    def span(self) -> float:
        """The width of the modelled interval: ``2 pi`` when circular."""
        return TWO_PI if self.circular else self.upper - self.lower

    def project(self, x: Tensor) -> Tensor:
        """``x`` wrapped into ``[lower, lower + 2 pi)`` (circular) or clamped to the limits;
        either way the result lies in ``[lower, upper]``."""
        if self.circular:
            x = wrap_into(x, self.lower)
        return torch.clamp(x, self.lower, self.upper)

    def contains(self, x: Tensor) -> Tensor:
        """Bool mask of the values inside the limits (always true on a circular domain)."""
        if self.circular:
            return torch.ones_like(x, dtype=torch.bool)
        return (x >= self.lower) & (x <= self.upper)


def scale_range(domain: JointDomain, min_scale: float) -> tuple[float, float]:
    """``(smallest, largest)`` component scale on ``domain``.

    The largest is ``pi / 2`` on a circle (so the three images of the wrapped density suffice)
    and the range's width otherwise (so the truncation constant stays above ``0.19`` for means
    inside the limits).
    """
    largest = _MAX_CIRCULAR_SCALE if domain.circular else domain.span
    return min(min_scale, largest / 2), largest


# ---------------------------------------------------------------------------- log density
def _normal_log_pdf(z: Tensor, scales: Tensor) -> Tensor:
    return -0.5 * z.square() - scales.log() - _LOG_SQRT_2PI


def _log1mexp(d: Tensor) -> Tensor:
    """``log(1 - exp(d))`` for ``d <= 0``, accurate at both ends (Maechler 2012).

    Each branch gets an input clamped to its own half, so the branch that ``where`` discards
    never produces an infinite value whose zero gradient would turn into NaN.
    """
    cut = -math.log(2.0)
    near = torch.log(-torch.expm1(d.clamp(min=cut, max=-1e-30)))
    far = torch.log1p(-torch.exp(d.clamp(max=cut)))
    return torch.where(d > cut, near, far)


def _log_ndtr(x: Tensor) -> Tensor:
    """``log Phi(x)`` with a finite, accurate gradient everywhere.

    torch's backward of ``log_ndtr`` computes ``exp(-(log_ndtr(x) + x^2 / 2))``, a difference of
    two huge numbers once ``x`` is very negative: in float32 it is wrong by 5 % at ``x = -1000``
    and can be ``inf`` or NaN further out, which is where a truncated component with a tiny scale
    puts the far limit. Below ``-20`` the asymptotic series ``-x^2/2 - log(-x) - log(2 pi)/2 +
    log(1 - 1/x^2 + 3/x^4 - 15/x^6)`` (error < 1e-8) replaces it; each branch sees an input
    clamped to its own side so the unused one stays finite.
    """
    cut = -20.0
    tail = x.clamp(max=cut)
    inv2 = tail.square().reciprocal()
    series = torch.log1p(inv2 * (-1.0 + inv2 * (3.0 - 15.0 * inv2)))
    asymptotic = -0.5 * tail.square() - torch.log(-tail) - _LOG_SQRT_2PI + series
    return torch.where(x < cut, asymptotic, log_ndtr(x.clamp(min=cut)))


def _log_truncation(a: Tensor, b: Tensor) -> Tensor:
    """``log(Phi(b) - Phi(a))`` for ``a < b``, computed on the side of the smaller tail."""
    flip = a > 0  # Phi(b) - Phi(a) = Phi(-a) - Phi(-b): keep the interval's left end <= 0
    lo, hi = torch.where(flip, -b, a), torch.where(flip, -a, b)
    log_hi = _log_ndtr(hi)
    return log_hi + _log1mexp(_log_ndtr(lo) - log_hi)


def _component_log_prob(x: Tensor, means: Tensor, scales: Tensor, domain: JointDomain) -> Tensor:
    """``(..., K)`` log densities of ``x (..., 1)`` under each component."""
    if domain.circular:
        r = wrap_angle(x - means)
        images = torch.stack((r - TWO_PI, r, r + TWO_PI), dim=-1) / scales[..., None]
        return torch.logsumexp(-0.5 * images.square(), dim=-1) - scales.log() - _LOG_SQRT_2PI
    a, b = (domain.lower - means) / scales, (domain.upper - means) / scales
    return _normal_log_pdf((x - means) / scales, scales) - _log_truncation(a, b)


def _log_weights(weights: Tensor) -> Tensor:
    # clamp_min keeps log finite (and its gradient zero) on the discarded branch of the where
    tiny = torch.finfo(weights.dtype).tiny
    return torch.where(weights > 0, weights.clamp_min(tiny).log(), -math.inf)


def full_precision(*tensors: Tensor) -> tuple[Tensor, ...]:
    """float32 copies of half-precision tensors (network outputs under bf16 autocast): the
    truncated-normal densities need the range and the special functions of float32.

    Example:
        >>> [t.dtype for t in full_precision(torch.ones(2, dtype=torch.bfloat16), torch.ones(2))]
        [torch.float32, torch.float32]
    """
    low = (torch.bfloat16, torch.float16)
    return tuple(t.float() if t.dtype in low else t for t in tensors)


def mixture_log_prob(
    x: Tensor, weights: Tensor, means: Tensor, scales: Tensor, domain: JointDomain
) -> Tensor:
    """Log density of ``x`` under a mixture of ``K`` normals on ``domain``.

    Args:
        x: ``(...)`` values; circular domains take any real (it is wrapped).
        weights: ``(..., K)`` non-negative mixing weights summing to one; zeros are allowed.
        means: ``(..., K)`` component locations.
        scales: ``(..., K)`` positive component scales (at most ``pi / 2`` when circular).
        domain: the joint's range.

    Returns:
        ``(...)``; ``-inf`` for ``x`` outside a limited domain.
    """
    x, weights, means, scales = full_precision(x, weights, means, scales)
    comp = _component_log_prob(x.unsqueeze(-1), means, scales, domain)
    out = torch.logsumexp(_log_weights(weights) + comp, dim=-1)
    return torch.where(domain.contains(x), out, -math.inf)


# ---------------------------------------------------------------------------- sampling
def _pick(weights: Tensor, generator: torch.Generator | None) -> Tensor:
    """``(...)`` component indices drawn with probabilities ``weights (..., K)``."""
    cdf = weights.cumsum(-1)
    u = torch.rand(
        cdf.shape[:-1], generator=generator, dtype=cdf.dtype, device=cdf.device
    ).unsqueeze(-1)
    # right=True: a zero-weight component owns an empty interval and is never drawn
    index = torch.searchsorted(cdf.contiguous(), (u * cdf[..., -1:]).contiguous(), right=True)
    return index.clamp_max(weights.shape[-1] - 1).squeeze(-1)


def _truncated_normal(
    mean: Tensor, scale: Tensor, domain: JointDomain, generator: torch.Generator | None
) -> Tensor:
    """Inverse-CDF draws of normals truncated to the limits, computed in float64."""
    return _truncated_normal_between(mean, scale, domain.lower, domain.upper, generator)


def _truncated_normal_between(
    mean: Tensor,
    scale: Tensor,
    lower: Tensor | float,
    upper: Tensor | float,
    generator: torch.Generator | None,
) -> Tensor:
    """Inverse-CDF draws of normals truncated to ``[lower, upper]`` (broadcast with ``mean``),
    computed in float64."""
    mean64, scale64 = mean.double(), scale.double()
    a, b = (lower - mean64) / scale64, (upper - mean64) / scale64
    flip = a > 0  # sample the mirrored normal so the interval's left end is <= 0
    lo, hi = torch.where(flip, -b, a), torch.where(flip, -a, b)
    u = torch.rand(mean.shape, generator=generator, dtype=torch.float64, device=mean.device)
    p_lo, p_hi = ndtr(lo), ndtr(hi)
    # an interval beyond ~37 scales from the mean underflows (p_hi = 0): its mass then sits
    # within scale / 37 of the end nearer the mean, hi in the mirrored frame
    z = torch.where(p_hi > 0, ndtri(p_lo + u * (p_hi - p_lo)), hi)
    z = torch.where(flip, -z, z)
    # ndtri(0 or 1) is -+inf: such a draw lands on a limit once the caller clamps it
    return (mean64 + scale64 * z).to(mean.dtype)


def mixture_sample(
    weights: Tensor,
    means: Tensor,
    scales: Tensor,
    domain: JointDomain,
    generator: torch.Generator | None = None,
) -> Tensor:
    """One draw per batch element from the mixture of :func:`mixture_log_prob`.

    Args:
        weights, means, scales: ``(..., K)`` mixture parameters.
        domain: the joint's range.
        generator: random generator (on the parameters' device).

    Returns:
        ``(...)`` values inside ``[lower, upper]`` (circular ones in ``[lower, lower + 2 pi)``).
    """
    index = _pick(weights, generator).unsqueeze(-1)
    mean, scale = means.gather(-1, index).squeeze(-1), scales.gather(-1, index).squeeze(-1)
    if domain.circular:
        noise = torch.randn(mean.shape, generator=generator, dtype=mean.dtype, device=mean.device)
        return domain.project(mean + scale * noise)
    return domain.project(_truncated_normal(mean, scale, domain, generator))


def _window_weights(
    weights: Tensor, means: Tensor, scales: Tensor, domain: JointDomain, lo: Tensor, hi: Tensor
) -> tuple[Tensor, Tensor, Tensor]:
    """Normalised weights, means and scales ``(..., K')`` (float64) of the mixture restricted
    to ``[lo, hi]`` (``(...)``): each component's weight times its mass inside the window.

    A circular component is a sum of three normal images ``mean + 2 pi m`` (``K' = 3 K``),
    placed around the image of its mean nearest the window's middle.
    """
    m, s = means.double(), scales.double()
    log_w = _log_weights(weights.double())
    if domain.circular:
        mid = (0.5 * (lo + hi))[..., None]
        near = mid - wrap_angle(mid - m)
        shifts = torch.tensor([-TWO_PI, 0.0, TWO_PI], dtype=m.dtype, device=m.device)
        m = (near[..., None] + shifts).flatten(-2)
        s, log_w = s.repeat_interleave(3, -1), log_w.repeat_interleave(3, -1)
    else:  # undo the truncation to the limits: the window lies inside them
        log_w = log_w - _log_truncation((domain.lower - m) / s, (domain.upper - m) / s)
    log_w = log_w + _log_truncation((lo[..., None] - m) / s, (hi[..., None] - m) / s)
    return torch.softmax(log_w, dim=-1), m, s


def mixture_sample_within(
    weights: Tensor,
    means: Tensor,
    scales: Tensor,
    domain: JointDomain,
    center: Tensor,
    radius: Tensor | float,
    generator: torch.Generator | None = None,
    wrap: bool = True,
) -> Tensor:
    """One draw per batch element from the mixture restricted to a window around ``center``.

    The density is the mixture's (that of :func:`mixture_log_prob`) times the indicator of
    ``[center - radius, center + radius]`` intersected with the limits (an arc of the circle
    when circular), renormalised: each component keeps its weight times its mass inside the
    window, and the drawn component is sampled truncated to the window.

    Args:
        weights, means, scales: ``(..., K)`` mixture parameters.
        domain: the joint's range.
        center: ``(...)`` window centres; projected into the domain first.
        radius: window half-widths ``> 0``, broadcast with ``center``; circular windows are
            capped at ``pi`` (the whole circle).
        generator: random generator (on the parameters' device).
        wrap: whether a circular window may cross the seam at ``lower = upper - 2 pi`` (a
            continuous joint); ``False`` keeps it inside ``[lower, upper]`` as for a limited
            joint (a revolute joint whose range is a full turn cannot pass its limits), while
            the density is still the wrapped one.

    Returns:
        ``(...)`` values inside the window and the limits (wrapped ones in
        ``[lower, lower + 2 pi)``, within ``radius`` of ``center`` on the circle).

    Example:
        >>> dom = JointDomain(-1.0, 1.0, circular=False)
        >>> x = mixture_sample_within(torch.tensor([0.5, 0.5]), torch.tensor([-0.8, 0.8]),
        ...                           torch.tensor([0.1, 0.1]), dom, torch.tensor(0.7), 0.2)
        >>> bool((x - 0.7).abs() <= 0.2)
        True
    """
    radius = torch.as_tensor(radius, dtype=means.dtype, device=means.device)
    if not bool((radius > 0).all()):
        raise ValueError("radius must be positive")
    wraps, center = domain.circular and wrap, center.to(means.dtype)
    if wraps:
        center, radius = domain.project(center), radius.clamp_max(math.pi)
    else:
        center = center.clamp(domain.lower, domain.upper)
    # bounds in the output dtype, so rounding the float64 draw back can never cross them
    lo, hi = center - radius, center + radius
    if not wraps:
        lo, hi = lo.clamp_min(domain.lower), hi.clamp_max(domain.upper)
    shape = torch.broadcast_shapes(means.shape[:-1], lo.shape)
    lo64, hi64 = lo.double().expand(shape), hi.double().expand(shape)
    w, m, s = _window_weights(weights, means, scales, domain, lo64, hi64)
    index = _pick(w, generator).unsqueeze(-1)
    mean, scale = m.gather(-1, index).squeeze(-1), s.gather(-1, index).squeeze(-1)
    x = _truncated_normal_between(mean, scale, lo64, hi64, generator)
    x = torch.minimum(torch.maximum(x, lo64), hi64).to(means.dtype)
    return domain.project(x) if wraps else torch.minimum(torch.maximum(x, lo), hi)
