"""``tolaria models <agent>`` and ``tolaria key set|delete <agent>``: model endpoints, headless.

The key is read from a hidden prompt when stdin is a terminal, else from the first line of
stdin (``pass show openai | tolaria key set openai``); never from the command line, where other
users could read it in the process list and the shell would keep it in its history.
"""

from __future__ import annotations

import getpass
import json
import sys

from tolaria.core.adapters.manifest import OPENAI_CHAT, AdapterSet, Manifest, load_adapters
from tolaria.core.modelchat.keys import SERVICE, KeyStoreError, delete_key, set_key

EXIT_OK, EXIT_ERROR, EXIT_BAD_INPUT = 0, 1, 2


def _model_manifest(agent: str) -> Manifest | None:
    adapters: AdapterSet = load_adapters()
    for err in adapters.errors:
        print(f"tolaria: broken adapter manifest: {err}", file=sys.stderr)
    manifest = adapters.manifests.get(agent)
    if manifest is None:
        chats = sorted(m.id for m in adapters.manifests.values() if m.protocol == OPENAI_CHAT)
        print(f"tolaria: unknown agent {agent!r} (model endpoints: {', '.join(chats) or 'none'})",
              file=sys.stderr)
        return None
    if manifest.protocol != OPENAI_CHAT:
        print(f"tolaria: {agent} is an agent CLI (protocol {manifest.protocol}), not a model "
              "endpoint; it manages its own models and keys", file=sys.stderr)
        return None
    return manifest


def cmd_models(agent: str, as_json: bool, timeout: float) -> int:
    from tolaria.core.modelchat.models_list import ModelListError, list_models

    manifest = _model_manifest(agent)
    if manifest is None:
        return EXIT_BAD_INPUT
    try:
        models = list_models(manifest, timeout)
    except ModelListError as exc:
        print(f"tolaria: {exc}", file=sys.stderr)
        return EXIT_ERROR
    if as_json:
        print(json.dumps({"agent": agent, "default": manifest.model, "models": models}, indent=2))
        return EXIT_OK
    if not models:
        print(f"{manifest.base_url} offers no models", file=sys.stderr)
    for model in models:
        print(f"{model}{'  (default)' if model == manifest.model else ''}")
    return EXIT_OK


def _read_key(manifest: Manifest) -> str:
    if sys.stdin is not None and sys.stdin.isatty():
        return getpass.getpass(f"API key for {manifest.name} (input hidden): ")
    line = sys.stdin.readline() if sys.stdin is not None else ""
    return line.strip()


def cmd_key(action: str, agent: str) -> int:
    manifest = _model_manifest(agent)
    if manifest is None:
        return EXIT_BAD_INPUT
    if not manifest.api_key_env:
        print(f"tolaria: {agent} sends no API key (its manifest has no api_key_env); add "
              f"`api_key_env = \"SOME_VARIABLE\"` to a user manifest with id {agent!r} first",
              file=sys.stderr)
        return EXIT_BAD_INPUT
    try:
        if action == "delete":
            if not delete_key(agent):
                print(f"no key stored for {agent}")
                return EXIT_OK
            print(f"deleted the key of {agent} from the system keyring")
            return EXIT_OK
        try:
            key = _read_key(manifest)
        except (EOFError, KeyboardInterrupt):
            key = ""
        if not key:
            print("tolaria: no key given (type it at the prompt or pipe it on stdin)",
                  file=sys.stderr)
            return EXIT_BAD_INPUT
        set_key(agent, key)
    except KeyStoreError as exc:
        print(f"tolaria: {exc} (${manifest.api_key_env})", file=sys.stderr)
        return EXIT_ERROR
    print(f"stored the key of {agent} in the system keyring (service {SERVICE!r}); "
          f"${manifest.api_key_env} still wins when it is set")
    return EXIT_OK
