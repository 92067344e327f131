"""The factor model: recovers a synthetic low-rank tensor, folds in new rows, is deterministic."""

from __future__ import annotations

import numpy as np

from heet_tui.profiling.completion import JOB, TYPE, FactorSettings, fit
from heet_tui.profiling.configs import config_features
from heet_tui.profiling.foldin import population_prior, posterior

PLACEMENTS = [(1,), (2,), (4,), (8,), (1, 1), (2, 2), (4, 4), (8, 8), (4, 4, 4), (2, 2, 2, 2), (3,), (6,)]


def synthetic(seed: int = 0, jobs: int = 40, types: int = 4, noise: float = 0.01):
    """Biases plus a rank-2 CP term in log space, the structure the model claims to capture."""
    rng = np.random.default_rng(seed)
    nc = len(PLACEMENTS)
    a, b, g = rng.normal(0, 1, jobs), rng.normal(0, 0.5, types), rng.normal(0, 0.5, nc)
    fa, fb, fc = rng.normal(0, 0.6, (jobs, 2)), rng.normal(0, 0.6, (types, 2)), rng.normal(0, 0.6, (nc, 2))
    clean = (a[:, None, None] + b[None, :, None] + g[None, None, :]
             + np.einsum("jr,tr,cr->jtc", fa, fb, fc))
    noisy = clean + rng.normal(0, noise, clean.shape)
    log_bsz = np.log(rng.integers(32, 1024, jobs).astype(float))
    return clean, noisy, log_bsz


def test_recovers_unobserved_cells_of_noisy_low_rank_tensor() -> None:
    clean, noisy, log_bsz = synthetic()
    rng = np.random.default_rng(1)
    observed = rng.random(clean.shape) < 0.6
    idx = np.argwhere(observed)
    model = fit(idx, noisy[observed], clean.shape, config_features(PLACEMENTS), log_bsz,
                FactorSettings(sweeps=60, reg_latent=0.02, reg_side=0.02, reg_cell=0.02))
    pred = model.predict_all_log()
    hidden = ~observed
    rmse_hidden = float(np.sqrt(np.mean((pred[hidden] - clean[hidden]) ** 2)))
    spread = float(np.std(clean[hidden]))
    assert rmse_hidden < 0.05, rmse_hidden  # 5% in throughput, against a spread of ~100%
    assert rmse_hidden < 0.05 * spread * 20
    assert model.residual_rms < 0.03


def test_fit_is_deterministic_under_a_seed() -> None:
    clean, noisy, log_bsz = synthetic(seed=3, jobs=15, types=3)
    idx = np.argwhere(np.ones(clean.shape, dtype=bool))
    phi = config_features(PLACEMENTS)
    one = fit(idx, noisy.ravel(), clean.shape, phi, log_bsz, FactorSettings(seed=7))
    two = fit(idx, noisy.ravel(), clean.shape, phi, log_bsz, FactorSettings(seed=7))
    assert np.array_equal(one.predict_all_log(), two.predict_all_log())


def test_fold_in_a_new_job_from_few_cells_beats_the_prior_mean() -> None:
    clean, noisy, log_bsz = synthetic(seed=5)
    observed = np.ones(clean.shape, dtype=bool)
    observed[0] = False  # job 0 is new
    idx = np.argwhere(observed)
    model = fit(idx, noisy[observed], clean.shape, config_features(PLACEMENTS), log_bsz)
    prior = population_prior(model.jobs[1:])
    t = np.repeat(np.arange(clean.shape[1]), len(PLACEMENTS))
    c = np.tile(np.arange(len(PLACEMENTS)), clean.shape[1])
    pick = np.array([0, 13, 26, 39, 7, 20])
    before = posterior(model, JOB, 0, prior, t[:0], c[:0], np.array([]))
    after = posterior(model, JOB, 0, prior, t[pick], c[pick], noisy[0, t[pick], c[pick]])
    err_before = np.abs(before.predict_log(t, c)[0] - clean[0, t, c]).mean()
    mean_after, var_after = after.predict_log(t, c)
    err_after = np.abs(mean_after - clean[0, t, c]).mean()
    assert err_after < 0.5 * err_before
    assert var_after.mean() < before.predict_log(t, c)[1].mean()


def test_fold_in_a_new_gpu_type() -> None:
    clean, noisy, log_bsz = synthetic(seed=9, types=5)
    observed = np.ones(clean.shape, dtype=bool)
    observed[:, 4, :] = False
    idx = np.argwhere(observed)
    model = fit(idx, noisy[observed], clean.shape, config_features(PLACEMENTS), log_bsz)
    prior = population_prior(model.types[:4], shrink=0.0, floor=0.02)
    j = np.repeat(np.arange(clean.shape[0]), len(PLACEMENTS))
    c = np.tile(np.arange(len(PLACEMENTS)), clean.shape[0])
    pick = np.arange(0, len(j), 37)
    post = posterior(model, TYPE, 4, prior, j[pick], c[pick], noisy[j[pick], 4, c[pick]])
    err = np.abs(post.predict_log(j, c)[0] - clean[j, 4, c])
    assert np.median(err) < 0.2
