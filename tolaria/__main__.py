from __future__ import annotations

from tolaria.cli.main import main

raise SystemExit(main())
