"""``python -m heet_agent`` and the zipapp entry point."""

import sys

from heet_agent.main import main

sys.exit(main())
