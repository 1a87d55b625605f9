"""Allow ``python -m goatherd``."""

from goatherd.cli import main

raise SystemExit(main())
