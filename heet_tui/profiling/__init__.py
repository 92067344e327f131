"""Profiling: predict every elastic configuration's throughput from a few short runs.

Modules, in the order data flows through them:

* ``sia_format``   read measured profiles in the Sia artifact's directory format.
* ``ground_truth`` turn profiles into a dense (model, batch) x GPU type x placement tensor.
* ``tensor``       the sparse throughput tensor with every observation's source and time.
* ``configs``      placement keys and the side features of a configuration.
* ``completion``   the CP-style latent-factor model in log space, fitted by alternating ridge.
* ``foldin``       Bayesian fold-in of a new job or GPU type: prediction + uncertainty.
* ``sampler``      which configuration to profile next (variance reduction, budget, seed).
* ``predictor``    the service the controller holds: observe, predict, next_to_profile,
                   and the scheduler's ``(gpu_type, placement) -> samples/s`` adapter.
* ``runs``         profiling-run command line, result parsing, GPU-second cost records.
* ``baselines`` / ``evaluation``  the accuracy benchmark (``heet-tui bench profiling``).
"""
