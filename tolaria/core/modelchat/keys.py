"""API keys of model endpoints: from the environment variable a manifest names, else the keyring.

A manifest never holds a key, only ``api_key_env`` (the *name* of a variable). When that
variable is unset or empty, the system keyring is asked for the entry of service
``tolaria``, user ``<agent id>`` (``tolaria key set <agent>`` stores it). Only manifests that
name ``api_key_env`` are looked up: asking the keyring for every local-model turn could pop up an
unlock dialog for an endpoint that needs no key.

The ``keyring`` package picks the platform's backend (macOS Keychain, Windows Credential Locker,
Secret Service on Linux desktops). Without a usable backend (headless Linux, CI) lookups quietly
find nothing and writes raise ``KeyStoreError`` with a message that says what to do instead.
Keys are never logged; error messages name the agent and the variable, never the value.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tolaria.core.adapters.manifest import Manifest

#: The keyring "service" of every Tolaria key; the "username" is the agent (manifest) id.
SERVICE = "tolaria"

log = logging.getLogger(__name__)


class KeyStoreError(Exception):
    """The system keyring cannot store or delete a key (no backend, locked, refused)."""


def missing_key_message(manifest: Manifest) -> str:
    return (f"{manifest.name}: no API key: set ${manifest.api_key_env} or store it in the "
            f"system keyring with `tolaria key set {manifest.id}`")


def _no_backend_reason() -> str | None:
    """Why there is no usable keyring backend, or None when there is one."""
    try:
        import keyring
        from keyring.backends import fail
    except ImportError as exc:  # an install without the dependency: degrade, do not crash
        return f"the keyring package is not installed ({exc})"
    try:
        backend = keyring.get_keyring()
    except Exception as exc:  # a broken keyring configuration or backend plugin
        return f"the system keyring could not be loaded ({type(exc).__name__})"
    if isinstance(backend, fail.Keyring):
        return "no system keyring is available on this machine (e.g. a headless session)"
    return None


def keyring_key(agent_id: str) -> str | None:
    """The key stored for ``agent_id``, or None (none stored, or no usable keyring). Blocking:
    a backend may talk to a keyring daemon; call it from a thread in async code."""
    if _no_backend_reason() is not None:
        return None
    import keyring
    from keyring.errors import KeyringError

    try:
        value = keyring.get_password(SERVICE, agent_id)
    except KeyringError as exc:  # locked, refused, daemon gone: same as "no key"
        log.warning("keyring lookup for %s failed: %s", agent_id, type(exc).__name__)
        return None
    except Exception as exc:  # third-party backends raise anything (D-Bus errors, OSError)
        log.warning("keyring lookup for %s failed: %s", agent_id, type(exc).__name__)
        return None
    return value or None


def resolve_api_key(manifest: Manifest, env: Mapping[str, str]) -> str | None:
    """The key for ``manifest``: ``env[api_key_env]`` first, then the keyring; None if the
    manifest needs none or none was found (then show ``missing_key_message``)."""
    if not manifest.api_key_env:
        return None
    value = env.get(manifest.api_key_env)
    if value:
        return value
    return keyring_key(manifest.id)


def set_key(agent_id: str, key: str) -> None:
    reason = _no_backend_reason()
    if reason is not None:
        raise KeyStoreError(f"cannot store the key: {reason}; set the agent's environment "
                            "variable instead")
    import keyring

    try:
        keyring.set_password(SERVICE, agent_id, key)
    except Exception as exc:
        raise KeyStoreError(f"the system keyring refused to store the key for {agent_id}: "
                            f"{type(exc).__name__}") from exc


def delete_key(agent_id: str) -> bool:
    """Remove the stored key; False when there was none."""
    reason = _no_backend_reason()
    if reason is not None:
        raise KeyStoreError(f"cannot delete the key: {reason}")
    import keyring
    from keyring.errors import PasswordDeleteError

    try:
        keyring.delete_password(SERVICE, agent_id)
    except PasswordDeleteError:
        return False
    except Exception as exc:
        raise KeyStoreError(f"the system keyring refused to delete the key for {agent_id}: "
                            f"{type(exc).__name__}") from exc
    return True
