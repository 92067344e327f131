"""The environment a job's processes start with (docs/TRAINING.md lists what a script gets)."""

import os


def bundle_root():
    """The directory (or .pyz) this agent's ``heet_agent`` package is imported from, when it
    runs from its deployed bundle; None when it is an installed package.

    Jobs get it on ``PYTHONPATH`` so that ``from heet_agent import elastic`` works on a host where
    nothing is installed, and gives the helper that matches the agent. An installed package is
    importable by its own interpreter already, and its site-packages must not leak into a job
    that runs under another Python.
    """
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    if root.endswith(".pyz") or os.path.isfile(os.path.join(root, "__main__.py")):
        return root
    return None


def job_environment(base, extra, job_id, generation, gpus, visible, emulated_speed, emulated_threads=None):
    """``gpus``: the process's own GPUs; ``visible``: what it sees, its job's GPUs on the host in
    ``LOCAL_RANK`` order, so that ``torch.cuda.set_device(LOCAL_RANK)`` picks its own, as under
    torchrun (with only its own GPU visible, that call failed on every rank but the first)."""
    env = dict(base)
    env.update(extra)
    # stdout into a file is block-buffered: a plain print() of a progress line reached the
    # log, and the controller, only kilobytes later, so profiling runs measured nothing
    if not env.get("PYTHONUNBUFFERED"):  # set but empty is unset to Python
        env["PYTHONUNBUFFERED"] = "1"
    env["HEET_JOB_ID"] = job_id
    env["HEET_GENERATION"] = str(generation)
    env["CUDA_VISIBLE_DEVICES"] = ",".join(str(g) for g in visible)
    # CUDA numbers GPUs fastest-first unless told otherwise; NVML and nvidia-smi (where our
    # indices come from) number them by PCI bus. Make the two agree, whatever the host's own
    # environment says (a FASTEST_FIRST from /etc/environment gave a job another job's GPUs)
    env["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"
    if emulated_speed is not None:
        env["HEET_EMULATED_SPEED"] = repr(float(emulated_speed))
        # The indices name emulated GPUs: real ones (if the host has any) stay out of the job.
        env["HEET_EMULATED_GPUS"] = ",".join(str(g) for g in gpus)
        env["CUDA_VISIBLE_DEVICES"] = ""
        if emulated_threads and not env.get("OMP_NUM_THREADS"):  # the spec's, or the host's, wins
            env["OMP_NUM_THREADS"] = str(emulated_threads)
    root = bundle_root()
    if root is not None:
        # After the user's own entries: a module of theirs named like ours wins.
        paths = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
        if root not in paths:
            env["PYTHONPATH"] = os.pathsep.join(paths + [root])
    return env
