"""What ``heet_agent.elastic.start`` reads from the launch's environment, checked: the job spec's
settings arrive as ``HEET_*`` variables, and a bad one is an ``ElasticError`` naming it.

Python 3.8 syntax: the agent bundle is unpacked on hosts whatever their Python.
"""

import math
import os


class ElasticError(Exception):
    """A setting the run cannot start with (a missing batch size or target, a bad variable)."""


def env_number(name, kind, least=None):  # least: the smallest value taken (a rank may be 0), else > 0
    raw = os.environ.get(name, "")
    if not raw:
        return None
    try:  # a count may come as "300.0" or "12.5" (the job spec's target is a number): round it up
        value = int(math.ceil(float(raw))) if kind is int else kind(raw)
    except (ValueError, OverflowError):
        raise ElasticError("%s=%r is not a number" % (name, raw))
    if not (value > 0 if least is None else value >= least):
        raise ElasticError("%s=%r must be %s" % (name, raw, "> 0" if least is None else ">= %d" % least))
    return value


def target_steps_from_env(batch_size, dataset_samples):
    steps = env_number("HEET_TARGET_STEPS", int)
    if steps is not None:
        return steps
    samples = env_number("HEET_TARGET_SAMPLES", int)
    epochs = env_number("HEET_TARGET_EPOCHS", float)
    if samples is None and epochs is not None:
        if dataset_samples is None:
            raise ElasticError("HEET_TARGET_EPOCHS needs HEET_DATASET_SAMPLES (dataset_samples in the job spec)")
        samples = epochs * dataset_samples
    if samples is None:
        return None
    return max(1, int(math.ceil(samples / batch_size)))
