"""How long a step would take on an emulated GPU.

A step's computation runs on the CPU and is taken to need its CPU time divided by the declared
speed: CPU time, not wall time, so that other emulated GPUs crowding the same cores do not change
what this one measures. Time the main thread spends *waiting on something other than a CPU*
counts as it is: a batch from DataLoader workers, a read, a sleep, peers in a collective. Those
waits would be there on the real GPU too, and with CPU time alone a job bound by its data loading
reported 20-60x the throughput it had (the workers' time and the main thread's waits were
invisible), which the plans and ETAs then believed.

Linux reports a thread's time on a CPU and waiting for one in ``/proc/thread-self/schedstat``;
the rest of its wall time it was blocked. Where that file cannot be read, waits are not counted
(the step is its CPU time / speed, as before).
"""

import time

SCHEDSTAT = "/proc/thread-self/schedstat"


def _sched_s():
    """This thread's seconds on a CPU plus waiting for one, or None."""
    try:
        with open(SCHEDSTAT) as fh:
            on_cpu, run_queue = fh.read().split()[:2]
        return (int(on_cpu) + int(run_queue)) / 1e9
    except (OSError, ValueError):
        return None


class StepClock:
    """Call :meth:`mark` where a step starts and :meth:`emulated_s` where it ends (same thread)."""

    def __init__(self, speed):
        self.speed = speed
        self.mark()

    def mark(self):
        self.wall0, self.cpu0, self.sched0 = time.perf_counter(), time.process_time(), _sched_s()

    def emulated_s(self):
        """The step's seconds on the emulated GPU: its CPU time / speed, plus what it waited on."""
        wall, cpu, sched = time.perf_counter(), time.process_time(), _sched_s()
        waited = 0.0
        if sched is not None and self.sched0 is not None:
            waited = max(0.0, (wall - self.wall0) - (sched - self.sched0))
        return (cpu - self.cpu0) / self.speed + waited
