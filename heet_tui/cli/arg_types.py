"""Argument types argparse checks before a command runs."""

from __future__ import annotations

import argparse
import math


def finite_float(text: str) -> float:
    """A float that is a number: ``--interval nan`` made ``sim`` spin at 100 % CPU for ever, and
    ``inf`` printed a table of dashes with exit code 0 (``<= 0`` checks let both through)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"not a finite number: {text!r}")
    return value


def fraction(text: str) -> float:
    """A number from 0 to 1: ``--gain-threshold 5``, meant as 5 %, was 500 %, remembered for good."""
    value = finite_float(text)
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a fraction from 0 to 1 (0.05 is 5%)")
    return value


def seed(text: str) -> int:
    """A random seed numpy takes: ``--seed -1`` ended ``sim`` in a traceback from numpy."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if not 0 <= value < 2**32:
        raise argparse.ArgumentTypeError(f"{value} is out of range (0 to {2**32 - 1})")
    return value
