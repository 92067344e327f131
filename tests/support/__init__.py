"""Reusable test fixtures (real OpenSSH servers on loopback)."""
