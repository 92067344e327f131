"""Widgets that render one part of a snapshot; they post messages up and never reach into siblings."""
