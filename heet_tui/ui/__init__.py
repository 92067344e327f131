"""The Textual app: the only package that imports textual. It renders snapshots and posts intents."""
