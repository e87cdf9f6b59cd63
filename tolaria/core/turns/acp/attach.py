"""A turn's attachments as ACP ``session/prompt`` content blocks, as the agent's advertised
``promptCapabilities`` allow (ADR 0028): ``image`` blocks only to an agent with ``image``
(otherwise the turn ends with one line naming the agent, before the prompt is sent), embedded
``resource`` blocks only with ``embeddedContext`` (otherwise their ``resource_link``); and a
``resource_link`` for each file the prompt mentions (``@path``), which every ACP agent takes."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from tolaria.core.attachments.forms import acp_prompt_blocks
from tolaria.core.turns.request import RunRequest


class AttachmentRefused(Exception):
    """The agent cannot take an attachment of the turn: ``str()`` is the line to show."""


def prompt_attachments(request: RunRequest, caps: Any, agent: str) -> list[Any] | str:
    """The SDK blocks after the prompt's text, or the refusal."""
    if not request.content_blocks and not request.mention_links:
        return []
    from acp.schema import EmbeddedResourceContentBlock, ImageContentBlock, ResourceContentBlock

    links = [ResourceContentBlock(type="resource_link", uri=Path(path).as_uri(),
                                  name=os.path.basename(path) or path)
             for path in request.mention_links]
    if not request.content_blocks:
        return links

    blocks = acp_prompt_blocks(request.content_blocks, image=bool(getattr(caps, "image", False)),
                               embedded=bool(getattr(caps, "embedded_context", False)),
                               agent=agent)
    if isinstance(blocks, str):
        names = [a.name for a in request.attachments if a.is_image]
        return blocks.replace("the image", names[0] if names else "the image")
    models: dict[str, type[Any]] = {"image": ImageContentBlock, "resource": EmbeddedResourceContentBlock,
                                     "resource_link": ResourceContentBlock}
    return [*[models[b["type"]].model_validate(b) for b in blocks], *links]
