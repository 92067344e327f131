"""Reading and editing the user's TOML files: the host list and job specs."""
