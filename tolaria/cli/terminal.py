"""Text an agent controls, made safe to print: escape sequences, C1 controls, lone surrogates.

An agent (or a tool's output it quotes) can write anything: ``ESC ] 52`` writes the clipboard,
``ESC ] 0`` retitles the window, ``ESC [ 2J`` clears the screen, and C1 bytes (U+0080-U+009F)
are the same commands on some terminals. Printed raw on a terminal, that text acts instead of
being read. So on a terminal every control sequence is removed except plain SGR colour (and
only where colour is wanted), and any other control character is shown escaped (``\\x07``).
``--json`` output is for programs, but is often read in a terminal too: there the C1 controls,
DEL and U+2028/2029 are written as ``\\uXXXX`` escapes, which JSON decodes to the same text.

Lone surrogates (an agent's JSON may carry ``"\\ud800"``) cannot be encoded as UTF-8: in text
they become U+FFFD, in JSON an escape (decoding gives the exact string back).
"""

from __future__ import annotations

import json
import re
from json.encoder import encode_basestring

TYPE_CHECKING = False  # not typing's: importing typing costs ``tolaria abort`` ~3 ms
if TYPE_CHECKING:
    from typing import Any

#: CSI (ESC [ or the C1 CSI), string commands (OSC, DCS, SOS, PM, APC) up to their terminator
#: (BEL or ST) or the end of the text, and the other ESC sequences.
_SEQUENCE = re.compile(
    r"(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]"
    r"|(?:\x1b[\]PX^_]|[\x90\x98\x9d\x9e\x9f]).*?(?:\x07|\x1b\\|\x9c|\Z)"
    r"|\x1b[ -/]*[0-~]",
    re.DOTALL)
#: Select Graphic Rendition: colour and bold/italic/underline only.
_SGR = re.compile(r"\x1b\[[0-9;:]*m")
#: Control characters left over (tab and newline are text).
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_SURROGATE = re.compile("[\ud800-\udfff]")
#: Characters json.dumps(ensure_ascii=False) leaves raw that a terminal or a JS reader trips on.
_JSON_UNSAFE = re.compile("[\x7f-\x9f\u2028\u2029\ud800-\udfff]")


def no_surrogates(text: str) -> str:
    """``text`` encodable as UTF-8: lone surrogates become U+FFFD."""
    return _SURROGATE.sub("\ufffd", text)


def for_terminal(text: str, *, keep_sgr: bool = False) -> str:
    """``text`` with its control sequences removed (SGR kept when ``keep_sgr``) and the other
    control characters escaped; safe to write to a terminal."""
    def sequence(match: re.Match[str]) -> str:
        seq = match.group(0)
        return seq if keep_sgr and _SGR.fullmatch(seq) else ""

    text = _SEQUENCE.sub(sequence, no_surrogates(text).replace("\r\n", "\n"))
    if keep_sgr:  # escape the controls but leave the kept SGR sequences whole
        parts = re.split(f"({_SGR.pattern})", text)
        return "".join(p if i % 2 else _escape_controls(p) for i, p in enumerate(parts))
    return _escape_controls(text)


def _escape_controls(text: str) -> str:
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group(0)):02x}", text)


#: ``json.dumps(value, ensure_ascii=False)`` without building an encoder for every call.
_ENCODE = json.JSONEncoder(ensure_ascii=False).encode


def _unsafe(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group(0)):04x}"


def json_line(value: Any, indent: int | None = None) -> str:
    """One JSON line (no newline) that keeps non-ASCII text readable, with C1 controls, DEL,
    U+2028/2029 and lone surrogates escaped."""
    text = _ENCODE(value) if indent is None else json.dumps(value, ensure_ascii=False,
                                                            indent=indent)
    # These characters only occur inside JSON strings, where an escape means the same thing.
    return _JSON_UNSAFE.sub(_unsafe, text)


def json_string(text: str) -> str:
    """``text`` as ``json_line`` writes a string (quoted, escaped the same way: the encoder's
    own function for strings when non-ASCII is kept)."""
    quoted = encode_basestring(text)
    if quoted.isascii() and "\x7f" not in quoted:  # most deltas: nothing to escape, no regex
        return quoted
    return _JSON_UNSAFE.sub(_unsafe, quoted)
