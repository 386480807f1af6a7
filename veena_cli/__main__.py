"""``python -m veena_cli``: the same entry point as the ``veena`` console script."""

from veena_cli.main import main

raise SystemExit(main())
