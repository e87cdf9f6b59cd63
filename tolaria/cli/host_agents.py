"""``tolaria agents --host DEST``: which agents a host has, with versions (ADR 0034), found as a
run there would find them; the same look the window's picker makes."""

from __future__ import annotations

import dataclasses
import json
import sys

from tolaria.cli.exits import EXIT_BAD_INPUT, EXIT_ERROR, EXIT_OK


async def cmd_host_agents(host: str, ssh_config: str | None, as_json: bool) -> int:
    from tolaria.config.agents import load_overrides
    from tolaria.config.overrides import AgentSettingsError, apply_overrides
    from tolaria.config.remote_hosts import load_target
    from tolaria.core.adapters.manifest import load_adapters
    from tolaria.core.remote.discover import discover
    from tolaria.core.remote.hosts import BadDestination

    try:
        target = load_target(host, ssh_config=ssh_config)
    except BadDestination as exc:
        print(f"tolaria: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    overrides, _problems = load_overrides()
    manifests = []
    for manifest in load_adapters().manifests.values():
        o = overrides.get(manifest.id)
        try:
            manifests.append(apply_overrides(manifest, o) if o is not None else manifest)
        except AgentSettingsError:
            manifests.append(manifest)  # as shipped: the settings' problem is said elsewhere
    found = await discover(target, manifests)
    if as_json:
        print(json.dumps({"host": host, "error": found.error, "info": found.info,
                          "agents": [dataclasses.asdict(d) for d in found.detections]},
                         indent=2))
        return EXIT_ERROR if found.error else EXIT_OK
    if found.error:
        print(f"tolaria: {found.error}", file=sys.stderr)
        return EXIT_ERROR
    info = found.info
    print(f"on {host}: {info.get('system', '?')} {info.get('machine', '')}, "
          f"python {info.get('python', '?')}, login shell {info.get('shell', '?')}")
    for d in found.detections:
        state = d.version or ("available" if d.path and not d.error else "")
        where = f"  [{d.source}]" if d.source else ""
        print(f"{d.agent:<12} {d.name:<28} {state}  {d.path or ''}{where}")
        if d.error:
            print(f"{'':<12} ! {d.error}")
    return EXIT_OK
