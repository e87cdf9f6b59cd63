from __future__ import annotations

from tolaria.cli import main

raise SystemExit(main())
