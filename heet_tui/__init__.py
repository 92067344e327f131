"""heet-tui: a terminal cluster manager for elastic training on heterogeneous GPU clusters."""

__version__ = "0.1.0"
