"""The heet agent: stdlib-only sources deployed to every host (see PROTOCOL.md)."""
