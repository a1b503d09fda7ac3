"""`python -m scheduler` is the same as the `tessera` console script."""

from scheduler.cli import main

raise SystemExit(main())
