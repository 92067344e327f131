"""heet-tui: a terminal cluster manager for elastic training on heterogeneous GPU clusters."""

import warnings

__version__ = "0.1.0"

# cryptography 51 deprecates DSA, and asyncssh touches its DSA classes on import: every command
# printed five CryptographyDeprecationWarnings on stderr before its own output (a fresh install
# on 2026-12-05 broke `heet-tui hosts list` on a bad file, whose stderr is the one error line).
# Nothing a user can act on: OpenSSH has not used DSA keys for years.
warnings.filterwarnings("ignore", message="DSA is deprecated", module=r"asyncssh(\.|$)")
