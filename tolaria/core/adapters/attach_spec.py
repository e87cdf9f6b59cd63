"""The ``[attachments]`` table of an adapter manifest: in which form the agent takes images and
other files (tolaria/core/attachments/forms.py renders them; ADR 0028).

```toml
[attachments]
images = "args"                           # none, claude-blocks, args, at-path, acp, openai
files = "path"                            # path, claude-blocks, args, at-path, acp, inline
image_args = ["--image", "{file}"]        # "args": per image, before the prompt's "--"
file_args = ["--file", "{file}"]          # "args": per file
include_args = ["--include-directories", "{dir}"]  # "at-path": lets the CLI read the
                                          # private copies outside the working folder
note = "only for models it believes can see"       # said with each image sent
```

Without the table an agent takes no images (refused before it starts, naming agent and file)
and every other file as a path to a private copy, written into the prompt.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

NONE = "none"
CLAUDE_BLOCKS = "claude-blocks"
ARGS = "args"
AT_PATH = "at-path"
ACP_BLOCKS = "acp"
OPENAI_PARTS = "openai"
PATH = "path"
INLINE = "inline"
IMAGE_FORMS = (NONE, CLAUDE_BLOCKS, ARGS, AT_PATH, ACP_BLOCKS, OPENAI_PARTS)
FILE_FORMS = (PATH, CLAUDE_BLOCKS, ARGS, AT_PATH, ACP_BLOCKS, INLINE)
_KEYS = {"images", "files", "image_args", "file_args", "include_args", "note"}


@dataclass(frozen=True)
class AttachSpec:
    images: str = NONE
    files: str = PATH
    image_args: tuple[str, ...] = ()
    file_args: tuple[str, ...] = ()
    include_args: tuple[str, ...] = ()
    note: str = ""

    @property
    def takes_images(self) -> bool:
        return self.images != NONE


def _argv(value: object, key: str, placeholder: str,
          fail: Callable[[str, str], Exception]) -> tuple[str, ...]:
    if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
        raise fail(key, f'must be a list of strings with {placeholder}, e.g. ["--x", '
                        f'"{placeholder}"]')
    if sum(part.count(placeholder) for part in value) != 1:
        raise fail(key, f"must contain {placeholder} exactly once")
    return tuple(value)


def parse_attach_spec(value: object, fail: Callable[[str, str], Exception]) -> AttachSpec:
    """The ``[attachments]`` table; ``fail(key, reason)`` builds the manifest's error."""
    if not isinstance(value, dict):
        raise fail("attachments", "must be a table (images = ..., files = ...)")
    unknown = sorted(set(value) - _KEYS)
    if unknown:
        raise fail(f"attachments.{unknown[0]}", f"unknown key (known: {', '.join(sorted(_KEYS))})")
    images = value.get("images", NONE)
    if images not in IMAGE_FORMS:
        raise fail("attachments.images", f"must be one of {', '.join(IMAGE_FORMS)}, got {images!r}")
    files = value.get("files", PATH)
    if files not in FILE_FORMS:
        raise fail("attachments.files", f"must be one of {', '.join(FILE_FORMS)}, got {files!r}")
    spec: dict[str, tuple[str, ...]] = {}
    for key, placeholder, needed in (("image_args", "{file}", images == ARGS),
                                     ("file_args", "{file}", files == ARGS),
                                     ("include_args", "{dir}", False)):
        if key in value:
            spec[key] = _argv(value[key], f"attachments.{key}", placeholder, fail)
        elif needed:
            raise fail(f"attachments.{key}", f"is needed with the form \"{ARGS}\"")
    note = value.get("note", "")
    if not isinstance(note, str):
        raise fail("attachments.note", "must be a string")
    return AttachSpec(images=str(images), files=str(files), note=note, **spec)
