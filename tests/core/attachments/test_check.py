"""Checking a file at attach time with real files: images known by their bytes, hostile input
refused with a specific line, nothing hangs (issue 26 item 7)."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest
from attachfiles import png_bytes, write_png

from tolaria.core.attachments.check import check_file
from tolaria.core.attachments.model import (
    BINARY,
    IMAGE,
    MB,
    TEXT,
    AttachError,
    AttachLimits,
    sniff_image,
)

LIMITS = AttachLimits(max_file=32 * MB, max_chat=64 * MB)


def test_an_image_is_known_by_its_bytes_not_its_name(tmp_path: Path) -> None:
    data = write_png(tmp_path / "shot.png")
    checked = check_file(str(tmp_path / "shot.png"), LIMITS)
    assert (checked.kind, checked.mime, checked.data) == (IMAGE, "image/png", data)
    # A PNG named .txt is still a PNG; a JPEG named .png is a JPEG.
    (tmp_path / "oops.txt").write_bytes(data)
    assert check_file(str(tmp_path / "oops.txt"), LIMITS).mime == "image/png"
    (tmp_path / "photo.png").write_bytes(b"\xff\xd8\xff\xe0" + b"\0" * 64)
    assert check_file(str(tmp_path / "photo.png"), LIMITS).mime == "image/jpeg"
    assert sniff_image(b"RIFF\0\0\0\0WEBPVP8 ") == "image/webp"
    assert sniff_image(b"GIF89a....") == "image/gif"


def test_a_non_image_named_png_is_refused(tmp_path: Path) -> None:
    (tmp_path / "fake.png").write_text("this is not an image\n")
    with pytest.raises(AttachError, match=r"fake\.png is named like an image but is not one"):
        check_file(str(tmp_path / "fake.png"), LIMITS)


def test_text_and_binary_files(tmp_path: Path) -> None:
    (tmp_path / "notes.md").write_text("# héllo\n")
    (tmp_path / "blob.bin").write_bytes(b"\0\1\2\3" * 10)
    assert check_file(str(tmp_path / "notes.md"), LIMITS).kind == TEXT
    assert check_file(str(tmp_path / "blob.bin"), LIMITS).kind == BINARY


def test_a_200_mb_image_is_refused_from_its_size_without_reading_it(tmp_path: Path) -> None:
    big = tmp_path / "huge.png"
    with big.open("wb") as fh:  # sparse: 200 MB on paper, nothing on disk
        fh.write(png_bytes())
        fh.truncate(200 * MB)
    started = time.monotonic()
    with pytest.raises(AttachError, match=r"huge\.png is 200\.0 MB; the limit is 32\.0 MB per file"):
        check_file(str(big), LIMITS)
    assert time.monotonic() - started < 1.0


def test_a_fifo_is_refused_at_once_even_with_a_writer_waiting(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.png"
    os.mkfifo(fifo)
    started = time.monotonic()
    with pytest.raises(AttachError, match=r"is a FIFO \(named pipe\), not a file"):
        check_file(str(fifo), LIMITS)
    assert time.monotonic() - started < 1.0


def test_a_fifo_swapped_in_after_the_stat_is_refused_without_blocking(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The race: a regular file at stat time, a FIFO at open time (opened non-blocking)."""
    target = tmp_path / "swap.txt"
    target.write_text("x")
    real_stat = os.stat

    def swapping_stat(path: str) -> os.stat_result:
        result = real_stat(path)
        target.unlink()
        os.mkfifo(target)
        return result

    monkeypatch.setattr(os, "stat", swapping_stat)
    done = threading.Event()
    errors: list[str] = []

    def attempt() -> None:
        try:
            check_file(str(target), LIMITS)
        except AttachError as exc:
            errors.append(str(exc))
        done.set()

    threading.Thread(target=attempt, daemon=True).start()
    assert done.wait(5), "attaching a FIFO hung"
    monkeypatch.undo()
    assert errors and "FIFO" in errors[0]


def test_devices_and_folders_are_refused(tmp_path: Path) -> None:
    with pytest.raises(AttachError, match=r"/dev/zero is a device, not a file"):
        check_file("/dev/zero", LIMITS)
    with pytest.raises(AttachError, match=r"is a folder: attach the files in it one by one"):
        check_file(str(tmp_path), LIMITS)


def test_paths_with_a_newline_or_nul_are_refused_by_name(tmp_path: Path) -> None:
    odd = tmp_path / "two\nlines.txt"
    odd.write_text("hi")
    with pytest.raises(AttachError, match=r"two\\nlines\.txt: the path holds a line break"):
        check_file(str(odd), LIMITS)
    with pytest.raises(AttachError, match=r"the path holds a NUL character"):
        check_file(str(tmp_path / "a\0b"), LIMITS)
    with pytest.raises(AttachError, match="no such file"):
        check_file(str(tmp_path / "gone.png"), LIMITS)


def test_a_file_that_grows_past_the_cap_while_read_is_refused(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    small = AttachLimits(max_file=1000, max_chat=10_000)
    grow = tmp_path / "grow.txt"
    grow.write_text("a" * 900)
    real_fstat = os.fstat

    def growing_fstat(fd: int) -> os.stat_result:
        with grow.open("a") as fh:
            fh.write("b" * 5000)
        return real_fstat(fd)

    monkeypatch.setattr(os, "fstat", growing_fstat)
    with pytest.raises(AttachError, match="per file"):
        check_file(str(grow), small)
