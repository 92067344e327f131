"""Pure domain types: hosts, GPUs, jobs, allocations, plans, snapshots. No I/O here."""
