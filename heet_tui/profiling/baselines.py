"""The two simple predictors the completion model must beat (see the profiling benchmark).

(a) Scaling-curve bootstrap, as Sia does it: measure the job's smallest configuration on each
    GPU type and multiply by a reference scaling curve, the geometric mean over known jobs of
    throughput(config) / throughput(that smallest config), on the same type when known. The
    caller passes the same model's other batch sizes as the known jobs when there are any, so
    in leave-one-job-out the curve is the model's own.
(b) Nearest profiled job: copy the value measured for the most similar known job (closest in
    log throughput on the cells measured for the new one) at the same type and configuration.

Both work on a dense log-throughput array ``logv`` (jobs, types, configs) with NaN for unknown
cells and a boolean ``known`` mask of what the predictor may look at.
"""

from __future__ import annotations

import numpy as np


def _gm_ratio(logv: np.ndarray, known: np.ndarray, jobs: np.ndarray, t_num: int, c_num: int,
              t_den: int, c_den: int) -> float | None:
    ok = known[jobs, t_num, c_num] & known[jobs, t_den, c_den]
    if not ok.any():
        return None
    sel = jobs[ok]
    return float(np.mean(logv[sel, t_num, c_num] - logv[sel, t_den, c_den]))


def smallest_config(candidates: list[tuple[int, int]], gpus: np.ndarray) -> dict[int, int]:
    """Per type, the candidate config with the fewest GPUs (ties: fewest hosts, i.e. lowest index)."""
    best: dict[int, int] = {}
    for t, c in candidates:
        if t not in best or (gpus[c], c) < (gpus[best[t]], best[t]):
            best[t] = c
    return best


def scaling_curve_job(logv: np.ndarray, known: np.ndarray, train_jobs: np.ndarray, measured: dict[int, int],
                      h: int, targets: list[tuple[int, int]], gpus: np.ndarray) -> np.ndarray:
    """Baseline (a) for one job ``h`` whose cells ``measured`` (type -> config) are known."""
    out = np.empty(len(targets))
    anchors = list(measured.items())
    for i, (t, c) in enumerate(targets):
        order = ([(t, measured[t])] if t in measured else []) + [a for a in anchors if a[0] != t]
        value = None
        for ta, ca in order:
            ratio = _gm_ratio(logv, known, train_jobs, t, c, ta, ca)
            if ratio is not None:
                value = logv[h, ta, ca] + ratio
                break
        if value is None:  # nothing to borrow a curve from: near-linear scaling from the anchor
            ta, ca = order[0]
            value = logv[h, ta, ca] + 0.8 * np.log(gpus[c] / gpus[ca])
        out[i] = value
    return out


def nearest_job(logv: np.ndarray, known: np.ndarray, train_jobs: np.ndarray, probe: list[tuple[int, int]],
                probe_values: np.ndarray, targets: list[tuple[int, int]]) -> np.ndarray:
    """Baseline (b): copy the most similar known job's value at the same type and config."""
    dist = np.full(len(train_jobs), np.inf)
    for k, j in enumerate(train_jobs):
        diffs = [logv[j, t, c] - v for (t, c), v in zip(probe, probe_values, strict=True) if known[j, t, c]]
        if diffs:
            dist[k] = float(np.sqrt(np.mean(np.square(diffs))))
    order = train_jobs[np.argsort(dist, kind="stable")]
    out = np.empty(len(targets))
    for i, (t, c) in enumerate(targets):
        have = order[known[order, t, c]]
        if len(have):
            out[i] = logv[have[0], t, c]
        else:
            anchor = probe_values[0] if len(probe_values) else 0.0
            out[i] = anchor
    return out


def type_transfer(logv: np.ndarray, known: np.ndarray, new_type: int, probe: list[tuple[int, int, int]],
                  targets: list[tuple[int, int]]) -> np.ndarray:
    """Baseline (b) for a new GPU type: the nearest known type (most consistent ratio on the
    probed cells) at the same job and configuration, times the mean measured ratio."""
    types = [t for t in range(logv.shape[1]) if t != new_type]
    scored = []
    for t in types:
        diffs = [logv[j, new_type, c] - logv[j, t, c] for j, _, c in probe if known[j, t, c]]
        if diffs:
            scored.append((float(np.std(diffs)) if len(diffs) > 1 else 0.0, -len(diffs), t, float(np.mean(diffs))))
    scored.sort()
    out = np.empty(len(targets))
    for i, (j, c) in enumerate(targets):
        value = None
        for _, _, t, shift in scored:
            if known[j, t, c]:
                value = logv[j, t, c] + shift
                break
        if value is None:
            value = float(np.mean([logv[p[0], new_type, p[2]] for p in probe])) if probe else 0.0
        out[i] = value
    return out
