"""The agent's one error type, shared by its modules."""


class JobError(ValueError):
    """A request about jobs that cannot be carried out; the message goes back to the controller."""
