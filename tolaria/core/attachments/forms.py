"""Each agent's own form of a turn's attachments (the manifest's ``[attachments]``, ADR 0028).

``refusal`` is asked before anything starts: an image for an agent that takes none is refused
with one line naming the agent and the file, never dropped and never sent as a path. ``deliver``
turns the staged private copies into what the agent reads:

- ``claude-blocks``: content blocks of Claude's stream-json user message (an image as a base64
  ``image`` block, a text file as a ``text`` block holding it);
- ``args``: the manifest's ``image_args``/``file_args`` per file (Codex ``--image``, opencode
  ``--file``), before the prompt's ``--``;
- ``at-path``: ``@/path`` references in the prompt (Gemini, Qwen), with ``include_args`` naming
  the staged folder, which lies outside the working folder;
- ``acp``: ACP content blocks (``image``; a text file as an embedded ``resource``, which the turn
  turns into a ``resource_link`` when the agent's ``promptCapabilities`` lack
  ``embeddedContext``; other files as a ``resource_link``); ``openai``: ``image_url`` parts;
- ``path``: the private copy's path written into the prompt, for the agent's read tool;
- ``inline``: a text file's content written into the prompt.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tolaria.core.adapters.attach_spec import (
    ACP_BLOCKS,
    ARGS,
    AT_PATH,
    CLAUDE_BLOCKS,
    INLINE,
    OPENAI_PARTS,
    PATH,
    AttachSpec,
)
from tolaria.core.attachments.model import TEXT, Attachment

#: How a file went, for the ``attached`` event and the chip.
HOW_WORDS = {CLAUDE_BLOCKS: "as an image block", ARGS: "as an argument",
             AT_PATH: "as an @path reference", ACP_BLOCKS: "as an ACP block",
             OPENAI_PARTS: "as an image part", PATH: "as a path to a private copy",
             INLINE: "inline in the prompt"}


def form_of(spec: AttachSpec, attachment: Attachment) -> str:
    """The form ``attachment`` takes for this agent (one of attach_spec's forms)."""
    if attachment.is_image:
        return spec.images
    form = spec.files
    if form in (CLAUDE_BLOCKS, INLINE) and attachment.kind != TEXT:
        return PATH  # a binary file cannot go inline: its private copy's path does
    return form


def refusal(agent: str, spec: AttachSpec, attachments: Sequence[Attachment]) -> str | None:
    """Why this turn cannot go to ``agent`` (one line naming it and the file), or None."""
    for attachment in attachments:
        if attachment.is_image and not spec.takes_images:
            return (f"{agent} cannot take images: {attachment.name} was not sent (pick an agent "
                    "that can see images, or remove it)")
    return None


@dataclass
class Delivery:
    """What the turn sends, attachments included."""

    prompt: str
    #: Arguments added before the command's ``--`` (image/file flags, include folders).
    args: list[str] = field(default_factory=list)
    #: Claude stream-json content blocks after the prompt's text block.
    blocks: list[dict[str, Any]] = field(default_factory=list)
    #: (attachment, form, staged path) for each file, in order: the ``attached`` events.
    sent: list[tuple[Attachment, str, Path]] = field(default_factory=list)


def deliver(spec: AttachSpec, prompt: str, attachments: Sequence[Attachment],
            staged: Sequence[Path], data_of: Any) -> Delivery:
    """``prompt`` with ``attachments`` (whose private copies are ``staged``, in order) in the
    agent's form. ``data_of(attachment) -> bytes`` reads a stored copy (blocks only)."""
    out = Delivery(prompt)
    refs: list[str] = []
    paths: list[str] = []
    inline: list[str] = []
    include = False
    for attachment, path in zip(attachments, staged, strict=True):
        form = form_of(spec, attachment)
        out.sent.append((attachment, form, path))
        if form == CLAUDE_BLOCKS:
            data = data_of(attachment)
            if attachment.is_image:
                out.blocks.append({"type": "image", "source": {
                    "type": "base64", "media_type": attachment.mime,
                    "data": base64.b64encode(data).decode("ascii")}})
            else:
                out.blocks.append({"type": "text", "text": _wrapped(attachment, data)})
        elif form == ARGS:
            template = spec.image_args if attachment.is_image else spec.file_args
            out.args += [part.replace("{file}", str(path)) for part in template]
        elif form == AT_PATH:
            refs.append(f"@{path}")
            include = True
        elif form == ACP_BLOCKS:
            out.blocks.append(_acp_block(attachment, path, data_of))
        elif form == INLINE:
            inline.append(_wrapped(attachment, data_of(attachment)))
        elif form == PATH:
            paths.append(f"- {attachment.name}: {path}")
        elif form == OPENAI_PARTS:
            out.blocks.append({"type": "image_url", "image_url": {
                "url": f"data:{attachment.mime};base64,"
                       + base64.b64encode(data_of(attachment)).decode("ascii")}})
    if include and spec.include_args and staged:
        folder = str(staged[0].parent)
        out.args += [part.replace("{dir}", folder) for part in spec.include_args]
    tail: list[str] = []
    if refs:
        tail.append(" ".join(refs))
    if paths:
        tail.append("Attached files (private copies you can read):\n" + "\n".join(paths))
    tail += inline
    if tail:
        out.prompt = "\n\n".join([prompt, *tail])
    return out


def _wrapped(attachment: Attachment, data: bytes) -> str:
    text = data.decode("utf-8", "replace")
    return f'<attached-file name="{attachment.name}">\n{text}\n</attached-file>'


def _acp_block(attachment: Attachment, path: Path, data_of: Any) -> dict[str, Any]:
    if attachment.is_image:
        return {"type": "image", "mimeType": attachment.mime,
                "data": base64.b64encode(data_of(attachment)).decode("ascii")}
    link = {"type": "resource_link", "uri": path.as_uri(), "name": attachment.name,
            "mimeType": attachment.mime, "size": attachment.size}
    if attachment.kind == TEXT:
        return {"type": "resource", "resource": {
            "uri": path.as_uri(), "mimeType": attachment.mime,
            "text": data_of(attachment).decode("utf-8", "replace")}, "_link": link}
    return link


def acp_prompt_blocks(blocks: Sequence[dict[str, Any]], *, image: bool, embedded: bool,
                      agent: str) -> list[dict[str, Any]] | str:
    """``blocks`` as this ACP agent's ``promptCapabilities`` allow: an image to an agent without
    ``image`` is refused (the line naming agent and file), an embedded resource without
    ``embeddedContext`` goes as its ``resource_link``."""
    out: list[dict[str, Any]] = []
    for block in blocks:
        if block["type"] == "image" and not image:
            return (f"{agent} cannot take images (its ACP promptCapabilities say so): the image "
                    "was not sent")
        if block["type"] == "resource":
            block = {k: v for k, v in block.items() if k != "_link"} if embedded \
                else block["_link"]
        out.append(block)
    return out
