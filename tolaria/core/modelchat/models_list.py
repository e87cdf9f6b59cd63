"""The models an OpenAI-compatible endpoint offers (``GET <base_url>/models``).

Ollama, LM Studio, llama.cpp's server and OpenAI all answer ``{"data": [{"id": ...}, ...]}``.
Every failure becomes a ``ModelListError`` whose message says what to do (start the server, fix
the key, the address is not an OpenAI-compatible API). Blocking (httpx's sync client): call it
from a thread in async code. Used by ``tolaria models <agent>``.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from urllib.parse import urlsplit

from tolaria.core.adapters.manifest import OPENAI_CHAT, Manifest
from tolaria.core.modelchat.keys import resolve_api_key
from tolaria.support.redact import hide_values, redact_text

_LOCAL_HOSTS = {"localhost", "127.0.0.1", "::1", "0.0.0.0"}


class ModelListError(Exception):
    """The model list could not be fetched; the message is meant for the user."""


def server_name(manifest: Manifest) -> str:
    """"Ollama" for "Ollama (local model)": the name without its parenthesised remark."""
    return re.sub(r"\s*\(.*\)\s*$", "", manifest.name).strip() or manifest.id


def list_models(manifest: Manifest, timeout: float = 10.0, *, api_key: str | None = None,
                env: Mapping[str, str] | None = None) -> list[str]:
    """Model ids offered by ``manifest``'s endpoint, sorted. The key is ``api_key`` or, when not
    given, resolved like a chat turn does (environment variable, then the keyring)."""
    import httpx

    if manifest.protocol != OPENAI_CHAT:
        raise ModelListError(f"{manifest.id} is not a model endpoint (protocol "
                             f"{manifest.protocol}); only openai-chat agents list models")
    base = manifest.base_url.rstrip("/")
    key = api_key if api_key is not None else resolve_api_key(
        manifest, os.environ if env is None else env)

    def redact(text: str) -> str:  # an error shown to the user: the key and any other secret
        return redact_text(hide_values(text, (key,) if key else ()))

    url = f"{base}/models"
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    try:
        resp = httpx.get(url, headers=headers, timeout=timeout)
    except httpx.ConnectError as exc:
        raise ModelListError(_unreachable(manifest, base, exc)) from exc
    except httpx.TimeoutException as exc:
        raise ModelListError(f"no answer from {base} within {timeout:g} s") from exc
    except httpx.HTTPError as exc:
        raise ModelListError(redact(f"request to {url} failed: "
                                    f"{exc or type(exc).__name__}")) from exc
    detail = redact(resp.text[:300].strip())
    if resp.status_code in (401, 403):
        if key:
            hint = "the API key was refused"
        elif manifest.api_key_env:
            hint = (f"no API key was sent: set ${manifest.api_key_env} or run "
                    f"`tolaria key set {manifest.id}`")
        else:
            hint = "the server wants an API key (add api_key_env to the agent's manifest)"
        raise ModelListError(f"{base} answered HTTP {resp.status_code}: {hint}"
                             + (f" ({detail})" if detail else ""))
    if resp.status_code == 404:
        raise ModelListError(f"{base} does not offer a model list ({url}: HTTP 404)")
    if resp.status_code >= 400:
        raise ModelListError(f"{url} answered HTTP {resp.status_code}"
                             + (f": {detail}" if detail else ""))
    try:
        data = json.loads(resp.content)
    except ValueError as exc:
        kind = resp.headers.get("content-type", "unknown type")
        raise ModelListError(f"{url} did not answer JSON ({kind}): {detail[:120]!r} — is "
                             f"{base} an OpenAI-compatible API?") from exc
    items = data.get("data") if isinstance(data, dict) else None
    if not isinstance(items, list):
        raise ModelListError(f"{url} answered JSON without a \"data\" list of models")
    ids = {str(item["id"]) for item in items if isinstance(item, dict) and item.get("id")}
    return sorted(ids)


def _unreachable(manifest: Manifest, base: str, exc: Exception) -> str:
    text = str(exc)
    why = "connection refused" if "refused" in text.lower() else (text or type(exc).__name__)
    host = urlsplit(base).hostname or ""
    if host in _LOCAL_HOSTS:
        return f"cannot reach {base}: {why} — is {server_name(manifest)} running?"
    return f"cannot reach {base}: {why} — check the address and your network"
