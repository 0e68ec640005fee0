"""``python -m ostinato``: the ``ostinato`` command."""

from ostinato.cli.main import main

raise SystemExit(main())
