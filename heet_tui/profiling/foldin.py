"""Fold a new job or GPU type into a fitted model from a few cells, with uncertainty.

With the other two axes fixed a row's parameters enter the model linearly, so a job measured on
K configurations is a Bayesian linear regression: prior from the rows already fitted (the whole
population, or, when the same model was seen at other batch sizes, an interpolation between
those), likelihood from the K cells with the model's noise. The posterior mean predicts every
cell of the row; its covariance gives each cell's uncertainty and tells the sampler which
measurement would shrink the total uncertainty most.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from heet_tui.profiling.completion import JOB, TYPE, FactorModel

# Jobs with at least this many measured cells shape the shared factors and the priors; fewer and
# their fitted row is mostly the ridge penalty's zero, which would drag a prior towards nothing.
WELL_OBSERVED = 6

# A job's prediction on a GPU type it was never measured on rests on how other jobs gain on that
# type. With the type itself barely measured (a new type in the cluster), the fold-in's variance
# left that out: the bench's cold-type case put 16% of cells within one predicted standard
# deviation, not 68%. Measured need (bench profiling, cold-type, extra sd for 68% cover): 0.42 at
# 3 cells on the type, 0.38 at 7 and 15, 0.32 at 30; types known from ~1,500 cells need none.
UNSEEN_TYPE_VAR = 0.16  # log-space variance added for a type with no cells
TYPE_KNOWN_CELLS = 100  # cells on a type past which it adds nothing


def unseen_type_var(type_cells: int) -> float:
    """Extra log-space variance of a job's prediction on a type it has no cell on."""
    return UNSEEN_TYPE_VAR * max(0.0, 1.0 - type_cells / TYPE_KNOWN_CELLS)


@dataclass(frozen=True)
class Gaussian:
    mean: np.ndarray
    cov: np.ndarray


@dataclass(frozen=True)
class RowPosterior:
    """Posterior over one row's parameters, able to predict that row's cells."""

    model: FactorModel
    axis: int
    index: int
    belief: Gaussian

    def design(self, a: np.ndarray, c: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Design rows and fixed offsets for cells of this row; ``a`` indexes the other axis."""
        return design_and_offset(self.model, self.axis, self.index, a, c)

    def predict_log(self, a: np.ndarray, c: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Mean and variance (including measurement noise) of log throughput at cells (a, c)."""
        x, off = self.design(a, c)
        mean = off + x @ self.belief.mean
        var = np.einsum("nd,de,ne->n", x, self.belief.cov, x) + self.model.noise_var
        return mean, var


def design_and_offset(model: FactorModel, axis: int, index: int, a: np.ndarray, c: np.ndarray
                      ) -> tuple[np.ndarray, np.ndarray]:
    """Design rows and fixed offsets for cells of row ``index``; ``a`` indexes the other axis
    (types for a job row, jobs for a type row)."""
    if axis not in (JOB, TYPE):
        raise ValueError("fold-in is defined for jobs and GPU types")
    own = np.full(len(a), index, dtype=int)
    j, t = (own, np.asarray(a, dtype=int)) if axis == JOB else (np.asarray(a, dtype=int), own)
    c = np.asarray(c, dtype=int)
    return model.design(axis, j, t, c), model.offset(axis, j, t, c)


def population_prior(rows: np.ndarray, shrink: float = 0.2, floor: float = 1e-3) -> Gaussian:
    """Mean and shrunk covariance of the fitted rows (the prior for a row never seen before)."""
    mean = rows.mean(axis=0)
    if len(rows) < 2:
        return Gaussian(mean, np.eye(rows.shape[1]) * max(floor, 1.0))
    cov = np.cov(rows.T, bias=True)
    cov = (1 - shrink) * cov + shrink * np.diag(np.diag(cov)) + floor * np.eye(rows.shape[1])
    return Gaussian(mean, cov)


def family_prior(rows: np.ndarray, log_bsz: np.ndarray, target: float, spread: Gaussian) -> Gaussian:
    """Prior for a model seen at other batch sizes: interpolate its rows in log batch size.

    ``rows``/``log_bsz`` are the same model's fitted rows; ``spread`` is how far an interpolated
    row typically is from the truth (estimated by :func:`interpolation_spread`).
    """
    order = np.argsort(log_bsz)
    xs, ys = log_bsz[order], rows[order]
    if len(xs) == 1:
        mean = ys[0]
    else:
        mean = np.array([np.interp(target, xs, ys[:, k]) for k in range(ys.shape[1])])
        # Outside the seen range, a step of the nearest segment continues the trend, damped.
        gap = min(abs(target - xs[0]), abs(target - xs[-1])) if not xs[0] <= target <= xs[-1] else 0.0
        if gap > 0:
            lo, hi = (0, 1) if target < xs[0] else (-2, -1)
            slope = (ys[hi] - ys[lo]) / max(xs[hi] - xs[lo], 1e-9)
            edge = ys[0] if target < xs[0] else ys[-1]
            mean = edge + 0.5 * slope * (target - (xs[0] if target < xs[0] else xs[-1]))
    return Gaussian(mean, spread.cov * (1.0 + _distance(xs, target)))


def _distance(xs: np.ndarray, target: float) -> float:
    return float(np.min(np.abs(xs - target)) / math.log(2.0)) if len(xs) else 1.0


def interpolation_spread(rows: np.ndarray, log_bsz: np.ndarray, families: np.ndarray, fallback: Gaussian) -> Gaussian:
    """Covariance of interpolation errors, measured by hiding each interior row of each family."""
    errors = []
    for fam in np.unique(families):
        members = np.flatnonzero(families == fam)
        if len(members) < 3:
            continue
        order = members[np.argsort(log_bsz[members])]
        for i in range(1, len(order) - 1):
            left, mid, right = order[i - 1], order[i], order[i + 1]
            w = (log_bsz[mid] - log_bsz[left]) / max(log_bsz[right] - log_bsz[left], 1e-9)
            errors.append(rows[mid] - ((1 - w) * rows[left] + w * rows[right]))
    if len(errors) < 3:
        return Gaussian(np.zeros(rows.shape[1]), fallback.cov * 0.5)
    err = np.array(errors)
    cov = np.cov(err.T, bias=True) * 0.7 + 0.3 * np.diag(np.var(err, axis=0)) + 1e-3 * np.eye(rows.shape[1])
    return Gaussian(np.zeros(rows.shape[1]), cov)


def posterior(model: FactorModel, axis: int, index: int, prior: Gaussian, a: np.ndarray, c: np.ndarray,
              y: np.ndarray, weights: np.ndarray | None = None) -> RowPosterior:
    """Condition ``prior`` on measured log throughputs ``y`` at cells (a, c) of one row."""
    if len(y) == 0:
        return RowPosterior(model, axis, index, prior)
    x, off = design_and_offset(model, axis, index, a, c)
    w = np.ones(len(y)) if weights is None else np.asarray(weights, float)
    prior_prec = np.linalg.inv(prior.cov)
    prec = prior_prec + (x.T * w) @ x / model.noise_var
    cov = np.linalg.inv(prec)
    cov = 0.5 * (cov + cov.T)
    mean = cov @ (prior_prec @ prior.mean + (x.T * w) @ (y - off) / model.noise_var)
    return RowPosterior(model, axis, index, Gaussian(mean, cov))


@dataclass(frozen=True)
class EnsemblePosterior:
    """Several independently fitted models' posteriors for one row, averaged in log space.

    ALS lands in different local optima from different random starts; averaging a few removes
    most of that variance, and their disagreement is added to the predicted uncertainty.
    """

    members: tuple[RowPosterior, ...]

    def predict_log(self, a: np.ndarray, c: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        means, variances = zip(*(m.predict_log(a, c) for m in self.members), strict=True)
        stacked = np.stack(means)
        return stacked.mean(axis=0), np.stack(variances).mean(axis=0) + stacked.var(axis=0)


def conditional_prior(rows: np.ndarray, covariates: np.ndarray, target: np.ndarray, ridge: float = 1.0,
                      shrink: float = 0.2, floor: float = 1e-3) -> Gaussian:
    """Population prior whose mean depends on what is known about the row before measuring it.

    For a job that is its log batch size: across models, larger batches mean more samples/s
    and a different place on the local-batch efficiency curve. Ridge regression of the rows on
    ``[1, covariates]`` gives the mean; the residual spread gives the covariance.
    """
    z = np.column_stack([np.ones(len(rows)), covariates])
    zt = np.concatenate([[1.0], np.atleast_1d(target)])
    if len(rows) < z.shape[1] + 2:
        return population_prior(rows, shrink, floor)
    penalty = ridge * np.eye(z.shape[1])
    penalty[0, 0] = 0.0
    coef = np.linalg.solve(z.T @ z + penalty, z.T @ rows)
    resid = rows - z @ coef
    base = population_prior(resid, shrink, floor)
    return Gaussian(zt @ coef, base.cov)


def job_prior(rows: np.ndarray, families: np.ndarray, log_bsz: np.ndarray, family: str,
              target_log_bsz: float) -> Gaussian:
    """Prior for a job row from well-observed jobs' rows (their model names and log batches).

    The same model seen at other batch sizes: interpolate its rows. A model never seen: the
    population, its mean shifted by batch size.
    """
    if len(rows) == 0:
        raise ValueError("no fitted jobs to build a prior from")
    pop = conditional_prior(rows, log_bsz, target_log_bsz)
    same = families == family
    if not same.any():
        return pop
    spread = interpolation_spread(rows, log_bsz, families, pop)
    return family_prior(rows[same], log_bsz[same], target_log_bsz, spread)
