"""`python -m app.cli`: the `memwarden` command."""

from app.cli import main

raise SystemExit(main())
