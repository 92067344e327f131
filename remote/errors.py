"""The agent's one error type, shared by its modules."""


class JobError(ValueError):
    """A request about jobs that cannot be carried out; the message goes back to the controller."""


# The launch refusal while an older generation of the job is still exiting (stopped or fenced,
# within its grace period): the controller waits for that exit and tries again.
STILL_STOPPING = "is still stopping here"
