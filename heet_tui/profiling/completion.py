"""3-D collaborative filtering of log throughput: a CP/PARAFAC-style model with side structure.

For job j, GPU type t and configuration c the model says

    log T[j,t,c] = mu + a_j + b_t + g_c                      (biases)
                 + (alpha_j + beta_t) . phi_c                 (scaling laws: log k, hosts, ...)
                 + U_j . V_t                                  (a model's speed-up on a GPU type)
                 + D_j . E_c                                  (a job's own scaling shape)
                 + sum_f A_jf B_tf [phi_c, F_c]_f             (trilinear CP term)

where phi_c are fixed configuration features (:mod:`heet_tui.profiling.configs`), so what is learnt
about ``44`` transfers to ``444`` and a configuration nobody measured still gets a sub-linear,
communication-aware prediction. The trilinear term applied to phi says "this job's sensitivity to
communication times this type's cost of it"; F_c adds free config factors.

Fitting is alternating ridge least squares on observed cells only: with two axes fixed, a row's
parameters enter linearly, so each sweep solves one small regularised system per job, type and
configuration (batched in numpy). The same linearity gives fold-in: a new job (or GPU type) with a
handful of measured cells is a Bayesian linear regression with a prior learnt from the other
rows, whose posterior yields both the prediction and its uncertainty for every cell.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

JOB, TYPE, CONFIG = 0, 1, 2


@dataclass(frozen=True, slots=True)
class FactorSettings:
    """Ranks, ridge penalties and sweeps. Defaults were chosen on the Sia profiles (see bench)."""

    rank_job_type: int = 3
    rank_job_config: int = 4
    rank_free: int = 4
    reg_bias: float = 0.05
    reg_side: float = 0.1
    reg_cell: float = 1.0
    reg_latent: float = 0.1
    sweeps: int = 15
    seed: int = 0



@dataclass
class Layout:
    """Column positions of each parameter group inside the job, type and config rows."""

    features: int
    cell_features: int
    r_jt: int
    r_jc: int
    r_free: int

    @property
    def cp(self) -> int:
        return self.features + self.r_free

    @property
    def side(self) -> int:
        """Columns before the latent factors in job and type rows: bias and side coefficients."""
        return 1 + self.features + self.cell_features

    @property
    def job_dim(self) -> int:
        return self.side + self.r_jt + self.r_jc + self.cp

    @property
    def type_dim(self) -> int:
        return self.side + self.r_jt + self.cp

    @property
    def config_dim(self) -> int:
        return 1 + self.r_jc + self.r_free

    @staticmethod
    def _split(rows: np.ndarray, sizes: list[int]) -> tuple[np.ndarray, ...]:
        out, at = [], 0
        for n in sizes:
            out.append(rows[:, at] if n == 0 else rows[:, at:at + n])
            at += max(n, 1)
        return tuple(out)

    def job_parts(self, rows: np.ndarray) -> tuple[np.ndarray, ...]:
        """a, alpha (on phi), eta (on psi), U, D, A."""
        return self._split(rows, [0, self.features, self.cell_features, self.r_jt, self.r_jc, self.cp])

    def type_parts(self, rows: np.ndarray) -> tuple[np.ndarray, ...]:
        """b, beta (on phi), zeta (on psi), V, B."""
        return self._split(rows, [0, self.features, self.cell_features, self.r_jt, self.cp])

    def config_parts(self, rows: np.ndarray) -> tuple[np.ndarray, ...]:
        """g, E, F."""
        return self._split(rows, [0, self.r_jc, self.r_free])

    def penalties(self, axis: int, s: FactorSettings) -> np.ndarray:
        side = [s.reg_bias] + [s.reg_side] * self.features + [s.reg_cell] * self.cell_features
        if axis == JOB:
            latent = self.r_jt + self.r_jc + self.cp
        elif axis == TYPE:
            latent = self.r_jt + self.cp
        else:
            side, latent = [s.reg_bias], self.r_jc + self.r_free
        return np.array(side + [s.reg_latent] * latent, dtype=float)


LOCAL_BATCH_KNOTS = (4.0, 32.0, 256.0, 2048.0)


def local_batch_features(log_local: np.ndarray) -> np.ndarray:
    """Cell features of the local batch l = B / k: log(1 + l0 / l) for a ladder of l0.

    Step time is roughly alpha + beta * l, so log per-GPU throughput is log(1/beta) minus
    log(1 + l0 / l) with l0 = alpha / beta; a few fixed knots let a linear combination fit the
    unknown l0 of each model and GPU type, shared by every batch size of the model.
    """
    knots = np.log(np.array(LOCAL_BATCH_KNOTS))
    return np.log1p(np.exp(knots[None, :] - np.asarray(log_local, dtype=float)[:, None]))


@dataclass
class FactorModel:
    """Fitted parameters; rows are indexed like the tensor's axes.

    ``log_bsz`` (per job) with the first config feature (log GPU count) gives each cell's
    local batch size, the argument of the cell features psi.
    """

    settings: FactorSettings
    layout: Layout
    phi: np.ndarray  # (configs, features)
    log_bsz: np.ndarray  # (jobs,)
    mu: float
    jobs: np.ndarray
    types: np.ndarray
    configs: np.ndarray
    noise_var: float = 0.01
    residual_rms: float = field(default=0.0)

    def psi(self, j: np.ndarray, c: np.ndarray) -> np.ndarray:
        return local_batch_features(self.log_bsz[j] - self.phi[c, 0])

    def static(self, j: np.ndarray, c: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The parameter-free columns of a batch of cells (phi and psi), reusable across sweeps."""
        return self.phi[c], self.psi(j, c)

    def rows(self, axis: int) -> np.ndarray:
        return (self.jobs, self.types, self.configs)[axis]

    def design(self, axis: int, j: np.ndarray, t: np.ndarray, c: np.ndarray,
               static: tuple[np.ndarray, np.ndarray] | None = None, out: np.ndarray | None = None) -> np.ndarray:
        """One row per cell whose dot product with ``axis``'s parameter row is that row's share.

        With ``out`` (whose leading static columns were filled by an earlier call) only the
        columns that depend on other rows' parameters are rewritten, in place.
        """
        lay = self.layout
        phi, psi = static if static is not None else self.static(j, c)
        dim = (lay.job_dim, lay.type_dim, lay.config_dim)[axis]
        fill_static = out is None
        x = np.empty((len(c), dim)) if out is None else out
        lead = 1 if axis == CONFIG else lay.side
        if fill_static:
            x[:, 0] = 1.0
            if axis != CONFIG:
                x[:, 1:1 + lay.features] = phi
                x[:, 1 + lay.features:lay.side] = psi
        at = lead
        if axis == CONFIG:
            _, _, _, _, d, a = lay.job_parts(self.jobs)
            _, _, _, _, b = lay.type_parts(self.types)
            x[:, at:at + lay.r_jc] = d[j]
            x[:, at + lay.r_jc:] = (a[j] * b[t])[:, lay.features:]
            return x
        free = lay.config_parts(self.configs)[2][c]
        if axis == JOB:
            _, _, _, v, b = lay.type_parts(self.types)
            _, e, _ = lay.config_parts(self.configs)
            first, second, cp = v[t], e[c], b[t]
        else:
            _, _, _, u, _, a = lay.job_parts(self.jobs)
            first, second, cp = u[j], None, a[j]
        x[:, at:at + lay.r_jt] = first
        at += lay.r_jt
        if second is not None:
            x[:, at:at + lay.r_jc] = second
            at += lay.r_jc
        x[:, at:at + lay.features] = cp[:, :lay.features] * phi
        x[:, at + lay.features:] = cp[:, lay.features:] * free
        return x

    def predict_log(self, j: np.ndarray, t: np.ndarray, c: np.ndarray,
                    static: tuple[np.ndarray, np.ndarray] | None = None) -> np.ndarray:
        """Predicted log throughput for cells given as three index arrays."""
        static = static if static is not None else self.static(j, c)
        b, beta, zeta, _, _ = self.layout.type_parts(self.types)
        g, _, _ = self.layout.config_parts(self.configs)
        job_part = np.einsum("nd,nd->n", self.design(JOB, j, t, c, static), self.jobs[j])
        type_part = (b[t] + np.einsum("nf,nf->n", static[0], beta[t])
                     + np.einsum("nq,nq->n", static[1], zeta[t]))
        return self.mu + job_part + type_part + g[c]

    def offset(self, axis: int, j: np.ndarray, t: np.ndarray, c: np.ndarray,
               static: tuple[np.ndarray, np.ndarray] | None = None,
               design: np.ndarray | None = None) -> np.ndarray:
        """The part of each cell's prediction that does not depend on ``axis``'s row."""
        static = static if static is not None else self.static(j, c)
        x = design if design is not None else self.design(axis, j, t, c, static)
        own = self.rows(axis)[(j, t, c)[axis]]
        return self.predict_log(j, t, c, static) - np.einsum("nd,nd->n", x, own)

    def predict_all_log(self) -> np.ndarray:
        nj, nt, nc = len(self.jobs), len(self.types), len(self.configs)
        j, t, c = (a.ravel() for a in np.meshgrid(np.arange(nj), np.arange(nt), np.arange(nc), indexing="ij"))
        return self.predict_log(j, t, c).reshape(nj, nt, nc)


@dataclass(frozen=True)
class _Groups:
    """Cells sorted by one axis's index, so each row's cells are one contiguous slice."""

    order: np.ndarray
    rows: np.ndarray  # row index of each slice
    bounds: np.ndarray  # slice starts, plus the end

    @staticmethod
    def of(group: np.ndarray) -> _Groups:
        order = np.argsort(group, kind="stable")
        rows, starts = np.unique(group[order], return_index=True)
        return _Groups(order, rows, np.append(starts, len(group)))


def _solve_rows(x: np.ndarray, z: np.ndarray, groups: _Groups, count: int, penalty: np.ndarray,
                prior: np.ndarray) -> np.ndarray:
    """Per-row ridge regression towards ``prior`` rows; rows without cells get the prior."""
    d = x.shape[1]
    xs, zs = x[groups.order], z[groups.order]
    gram = np.tile(np.diag(penalty), (count, 1, 1))
    rhs = prior * penalty[None]
    for r, lo, hi in zip(groups.rows, groups.bounds[:-1], groups.bounds[1:], strict=True):
        block = xs[lo:hi]
        gram[r] += block.T @ block
        rhs[r] += block.T @ zs[lo:hi]
    return np.linalg.solve(gram.reshape(count, d, d), rhs[:, :, None])[:, :, 0]


def fit(idx: np.ndarray, y: np.ndarray, shape: tuple[int, int, int], phi: np.ndarray, log_bsz: np.ndarray,
        settings: FactorSettings | None = None) -> FactorModel:
    """Fit on observed cells ``idx`` (n, 3) with log throughputs ``y``.

    ``phi``: configuration features (first column log GPU count); ``log_bsz``: each job's log
    global batch size. Deterministic for a given ``settings.seed``.
    """
    s = settings or FactorSettings()
    if len(idx) == 0:
        raise ValueError("no observed cells to fit")
    idx = np.asarray(idx, dtype=int)
    lay = Layout(phi.shape[1], len(LOCAL_BATCH_KNOTS), s.rank_job_type, s.rank_job_config, s.rank_free)
    rng = np.random.default_rng(s.seed)
    nj, nt, nc = shape
    jobs = np.zeros((nj, lay.job_dim))
    types = np.zeros((nt, lay.type_dim))
    configs = np.zeros((nc, lay.config_dim))
    # Latent columns start small and random (a zero start is a saddle point of ALS).
    jobs[:, lay.side:] = rng.normal(0, 0.1, (nj, lay.job_dim - lay.side))
    types[:, lay.side:] = rng.normal(0, 0.1, (nt, lay.type_dim - lay.side))
    configs[:, 1:] = rng.normal(0, 0.1, (nc, lay.config_dim - 1))
    model = FactorModel(s, lay, np.asarray(phi, float), np.asarray(log_bsz, float), float(np.mean(y)),
                        jobs, types, configs)
    penalties = [lay.penalties(a, s) for a in (JOB, TYPE, CONFIG)]
    groups = [_Groups.of(idx[:, a]) for a in (JOB, TYPE, CONFIG)]
    j, t, c = idx[:, 0], idx[:, 1], idx[:, 2]
    static = model.static(j, c)
    designs = [model.design(axis, j, t, c, static) for axis in (JOB, TYPE, CONFIG)]
    pred = model.predict_log(j, t, c, static)
    for sweep in range(s.sweeps):
        for axis in (JOB, TYPE, CONFIG):
            rows = model.rows(axis)
            x = designs[axis] if sweep == 0 and axis == JOB else model.design(axis, j, t, c, static, designs[axis])
            own = rows[idx[:, axis]]
            offset = pred - np.einsum("nd,nd->n", x, own)
            rows[:] = _solve_rows(x, y - offset, groups[axis], len(rows), penalties[axis], np.zeros_like(rows))
            pred = offset + np.einsum("nd,nd->n", x, rows[idx[:, axis]])
    resid = y - model.predict_log(j, t, c, static)
    model.residual_rms = float(np.sqrt(np.mean(resid ** 2)))
    params = nj * lay.job_dim + nt * lay.type_dim + nc * lay.config_dim
    dof = max(len(y) - 0.5 * params, len(y) * 0.2)
    model.noise_var = max(float(resid @ resid) / dof, 1e-4)
    return model
