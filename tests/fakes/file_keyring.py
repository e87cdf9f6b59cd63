"""A real ``keyring`` backend for tests: passwords in a JSON file named by $TOLARIA_TEST_KEYRING.

Registered in-process with ``keyring.set_keyring(FileKeyring())`` or, for a ``tolaria``
subprocess, with ``PYTHON_KEYRING_BACKEND=file_keyring.FileKeyring`` and this folder on
``PYTHONPATH``. Plain text on purpose: it stands in for the system keyring in tests only.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from keyring.backend import KeyringBackend
from keyring.compat import properties
from keyring.errors import PasswordDeleteError


class FileKeyring(KeyringBackend):
    @properties.classproperty
    def priority(cls) -> float:
        # keyring instantiates every backend class it knows when it detects one: outside a
        # test that configured a file, this one must not be viable.
        if not os.environ.get("TOLARIA_TEST_KEYRING"):
            raise RuntimeError("TOLARIA_TEST_KEYRING is not set")
        return 1

    def __init__(self, path: str | os.PathLike[str] | None = None) -> None:
        super().__init__()  # type: ignore[no-untyped-call]  # keyring leaves it unannotated
        self.path = Path(path or os.environ.get("TOLARIA_TEST_KEYRING", "unset-test-keyring"))

    def _read(self) -> dict[str, str]:
        try:
            data: dict[str, str] = json.loads(self.path.read_text())
        except FileNotFoundError:
            return {}
        return data

    def _write(self, data: dict[str, str]) -> None:
        self.path.write_text(json.dumps(data))

    def get_password(self, service: str, username: str) -> str | None:
        return self._read().get(f"{service}/{username}")

    def set_password(self, service: str, username: str, password: str) -> None:
        data = self._read()
        data[f"{service}/{username}"] = password
        self._write(data)

    def delete_password(self, service: str, username: str) -> None:
        data = self._read()
        if data.pop(f"{service}/{username}", None) is None:
            raise PasswordDeleteError("no such password")
        self._write(data)
