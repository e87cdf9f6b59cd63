"""settings.toml on disk: round trips, hand-edits kept, broken files never written over, atomic
writes (a failing rename, a process killed mid-write), invalid values refused, fuzzed files."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import textwrap
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from tolaria.config.agents import AgentOverrides, load_overrides, save_overrides
from tolaria.config.settings import (
    Settings,
    SettingsFileError,
    SettingsValueError,
    load_settings,
    normalize_shortcut,
    save_settings,
    settings_path,
    shortcut_conflicts,
    validate_settings,
)
from tolaria.support import paths, tomlfile

ROOT = Path(__file__).resolve().parents[2]
CHANGED = Settings(stop_shortcut="Ctrl+.", stop_all_shortcut="Ctrl+Shift+.",
                   send_shortcut="Ctrl+Enter", new_chat_shortcut="Ctrl+T", watchdog_seconds=30.0,
                   grace_seconds=0.5, polite_window_ms=250, confirm_quit=False,
                   notify_background=False, retry_limit_seconds=0.0)

HAND_EDITED = textwrap.dedent("""\
    # My Tolaria settings. Keep this comment.
    [shortcuts]
    stop = "Esc"   # the big red button
    my_note = "unrelated key"

    # behaviour below
    [behaviour]
    watchdog_seconds = 90

    [plugins.someday]
    enabled = true
    """)


def temp_files(folder: Path) -> list[str]:
    return [p.name for p in folder.iterdir() if p.name.endswith(".tmp")]


def test_no_file_gives_defaults_and_saving_defaults_writes_nothing() -> None:
    assert settings_path() == paths.config_dir() / "settings.toml"
    assert load_settings() == (Settings(), [])
    save_settings(Settings())
    assert not settings_path().exists()


def test_round_trip_every_field() -> None:
    save_settings(CHANGED)
    assert load_settings() == (CHANGED, [])
    save_settings(Settings())  # back to every default: the keys stay, with default values
    assert load_settings() == (Settings(), [])


def test_new_file_is_private() -> None:
    save_settings(CHANGED)
    assert settings_path().stat().st_mode & 0o777 == 0o600


def test_hand_edits_comments_and_unknown_keys_survive_a_save() -> None:
    path = settings_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(HAND_EDITED)
    loaded, problems = load_settings()
    assert loaded.watchdog_seconds == 90.0
    assert any("shortcuts.my_note: unknown setting" in p and ":4:" in p for p in problems)
    save_settings(replace(loaded, grace_seconds=5.0, stop_shortcut="Ctrl+."))
    text = path.read_text()
    for kept in ("# My Tolaria settings. Keep this comment.", "# the big red button",
                 'my_note = "unrelated key"', "# behaviour below", "watchdog_seconds = 90",
                 "[plugins.someday]"):
        assert kept in text
    assert 'stop = "Ctrl+."   # the big red button' in text
    assert "grace_seconds = 5.0" in text
    again, _ = load_settings()
    assert (again.stop_shortcut, again.grace_seconds, again.watchdog_seconds) == ("Ctrl+.", 5.0,
                                                                                  90.0)


def test_base_keeps_a_value_edited_by_hand_while_the_window_was_open() -> None:
    save_settings(CHANGED)
    opened, _ = load_settings()
    path = settings_path()
    path.write_text(path.read_text().replace("grace_seconds = 0.5", "grace_seconds = 7"))
    save_settings(replace(opened, watchdog_seconds=45.0), base=opened)
    final, problems = load_settings()
    assert problems == []
    assert (final.grace_seconds, final.watchdog_seconds) == (7.0, 45.0)


def test_unset_polite_window_removes_the_key() -> None:
    save_settings(CHANGED)
    save_settings(replace(CHANGED, polite_window_ms=None))
    assert "polite_window_ms" not in settings_path().read_text()
    assert load_settings()[0].polite_window_ms is None


def test_corrupt_file_gives_defaults_a_line_number_and_is_never_overwritten() -> None:
    path = settings_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    raw = b'[shortcuts]\nstop = "Esc"\n\n[behaviour]\ngrace_seconds = = 3\n'
    path.write_bytes(raw)
    settings, problems = load_settings()
    assert settings == Settings()
    assert len(problems) == 1
    assert problems[0].startswith(f"{path}:5: not valid TOML")
    with pytest.raises(SettingsFileError) as caught:
        save_settings(CHANGED)
    assert (caught.value.path, caught.value.line) == (path, 5)
    assert "not valid TOML" in caught.value.problem
    assert path.read_bytes() == raw
    assert temp_files(path.parent) == []


def test_not_utf8_names_the_line() -> None:
    path = settings_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    raw = b'[shortcuts]\nstop = "\xff"\n'
    path.write_bytes(raw)
    _, problems = load_settings()
    assert problems[0].startswith(f"{path}:2: not UTF-8")
    with pytest.raises(SettingsFileError):
        save_settings(CHANGED)
    assert path.read_bytes() == raw


def test_a_table_that_is_not_a_table_refuses_to_save() -> None:
    path = settings_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    raw = b'behaviour = 3\n'
    path.write_bytes(raw)
    settings, problems = load_settings()
    assert settings == Settings()
    assert any("behaviour: must be a table" in p for p in problems)
    with pytest.raises(SettingsFileError, match="behaviour must be a table"):
        save_settings(CHANGED)
    assert path.read_bytes() == raw


def test_bad_values_in_the_file_are_named_with_line_and_key() -> None:
    path = settings_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text('[shortcuts]\nsend = "Alt+Enter"\n[behaviour]\ngrace_seconds = -1\n'
                    'confirm_quit = "yes"\npolite_window_ms = 1.5\n')
    settings, problems = load_settings()
    assert settings == Settings()
    text = "\n".join(problems)
    assert f'{path}:2: shortcuts.send: must be "Enter" or "Ctrl+Enter"' in text
    assert f"{path}:4: behaviour.grace_seconds: must be a number of seconds from 0 to 60" in text
    assert f"{path}:5: behaviour.confirm_quit: must be true or false, got 'yes'" in text
    assert f"{path}:6: behaviour.polite_window_ms: must be a whole number of milliseconds" in text
    # Saving something else leaves the bad values the user did not touch as they are.
    save_settings(replace(settings, stop_shortcut="F12"))
    assert "grace_seconds = -1" in path.read_text()


@pytest.mark.parametrize(("change", "field", "message"), [
    ({"grace_seconds": -1.0}, "grace_seconds", "must be a number of seconds from 0 to 60"),
    ({"grace_seconds": float("nan")}, "grace_seconds", "must be a number of seconds"),
    ({"watchdog_seconds": 0.0}, "watchdog_seconds", "must be a positive number of seconds"),
    ({"polite_window_ms": 60_001}, "polite_window_ms", "from 0 to 60000"),
    ({"send_shortcut": "Shift+Enter"}, "send_shortcut", 'must be "Enter" or "Ctrl+Enter"'),
    ({"stop_shortcut": "  "}, "stop_shortcut", "must be a key sequence"),
    ({"confirm_quit": "no"}, "confirm_quit", "must be true or false"),
    ({"new_chat_shortcut": "ctrl+."}, "new_chat_shortcut", 'New chat and Stop both use "ctrl+."'),
    ({"stop_shortcut": "Return"}, "stop_shortcut", "inserts a newline"),
    ({"stop_all_shortcut": "Ctrl+R"}, "stop_all_shortcut", "Restart turn"),
])
def test_invalid_values_are_refused_and_nothing_is_saved(change: dict[str, object], field: str,
                                                         message: str) -> None:
    save_settings(CHANGED)
    before = settings_path().read_bytes()
    bad = replace(CHANGED, **change)  # type: ignore[arg-type]
    problems = validate_settings(bad)
    assert any(f == field and message in m for f, m in problems), problems
    with pytest.raises(SettingsValueError) as caught:
        save_settings(bad)
    assert caught.value.problems == problems
    assert settings_path().read_bytes() == before


def test_shortcut_conflicts_in_words() -> None:
    assert shortcut_conflicts(Settings()) == []
    clash = Settings(stop_shortcut="Ctrl+N")
    assert shortcut_conflicts(clash) == ['New chat and Stop both use "Ctrl+N"']
    assert normalize_shortcut("shift+Escape") == normalize_shortcut("Shift+Esc")
    assert normalize_shortcut("Ctrl++") == "ctrl++"
    assert normalize_shortcut("Shift+Ctrl+K, Ctrl+C") == "ctrl+shift+k, ctrl+c"


def test_a_failing_rename_leaves_the_old_file_and_no_temp_file(
        monkeypatch: pytest.MonkeyPatch) -> None:
    save_settings(CHANGED)
    path = settings_path()
    before = path.read_bytes()

    def refuse(src: str, dst: str) -> None:
        raise OSError(18, "Invalid cross-device link")

    monkeypatch.setattr("tolaria.support.tomlfile.os.replace", refuse)
    with pytest.raises(OSError, match="cross-device"):
        save_settings(Settings())
    assert path.read_bytes() == before
    assert temp_files(path.parent) == []


def test_a_process_killed_mid_write_leaves_the_old_file_intact() -> None:
    save_settings(CHANGED)
    path = settings_path()
    before = path.read_bytes()
    # A real process dies (SIGKILL) after writing the temp file, before the rename.
    script = textwrap.dedent("""\
        import os, signal
        from tolaria.support import tomlfile
        from tolaria.config.settings import Settings, save_settings
        tomlfile.os.fsync = lambda fd: os.kill(os.getpid(), signal.SIGKILL)
        save_settings(Settings())
        """)
    proc = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=dict(os.environ),
                          capture_output=True, timeout=60, check=False)
    assert proc.returncode == -signal.SIGKILL
    assert path.read_bytes() == before
    assert load_settings() == (CHANGED, [])
    assert len(temp_files(path.parent)) == 1  # the dead writer's, ignored by readers
    save_settings(Settings())
    assert load_settings() == (Settings(), [])


_VALID = HAND_EDITED + '\n[agents.demo]\nenabled = false\nextra_args = ["-v"]\n'


@st.composite
def broken_files(draw: st.DrawFn) -> bytes:
    raw = _VALID.encode()
    how = draw(st.sampled_from(["insert", "delete", "junk", "truncate"]))
    at = draw(st.integers(0, len(raw)))
    if how == "insert":
        return raw[:at] + draw(st.sampled_from([b"[", b"=", b'"', b"\xff", b"\n[x", b" = ="])) + raw[at:]
    if how == "delete":
        return raw[:at] + raw[at + draw(st.integers(1, 20)):]
    if how == "truncate":
        return raw[:at]
    return draw(st.binary(max_size=200))


@hsettings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(broken_files())
def test_fuzzed_files_never_crash_and_are_never_overwritten_when_broken(raw: bytes) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "settings.toml"
        path.write_bytes(raw)
        settings, problems = load_settings(path)
        assert isinstance(settings, Settings)
        try:
            tomlfile.parse_text(raw, path)
            parses = True
        except SettingsFileError:
            parses = False
        if not parses:
            assert problems and str(path) in problems[0]
        overrides, agent_problems = load_overrides(path)
        assert parses or (overrides == {} and agent_problems)
        try:
            save_settings(CHANGED, path)
        except SettingsFileError:
            assert path.read_bytes() == raw
        else:
            assert parses
            assert load_settings(path)[0] == CHANGED
        before = path.read_bytes()
        wanted = AgentOverrides(model="m", env={"A": "1"})
        try:
            save_overrides("demo", wanted, path)
        except SettingsFileError:
            assert path.read_bytes() == before
        else:
            assert parses
            assert load_overrides(path)[0]["demo"] == wanted
        assert temp_files(Path(folder)) == []


def test_concurrent_saves_from_several_processes_lose_nothing() -> None:
    script = textwrap.dedent("""\
        import sys
        from tolaria.config.agents import AgentOverrides, save_overrides
        agent = sys.argv[1]
        for n in range(20):
            save_overrides(agent, AgentOverrides(model=f"m{n}"))
        """)
    procs = [subprocess.Popen([sys.executable, "-c", script, agent], cwd=ROOT, env=dict(os.environ))
             for agent in ("alpha", "beta", "gamma")]
    for proc in procs:
        assert proc.wait(timeout=120) == 0
    overrides, problems = load_overrides()
    assert problems == []
    assert {k: o.model for k, o in overrides.items()} == {"alpha": "m19", "beta": "m19",
                                                          "gamma": "m19"}
    assert temp_files(settings_path().parent) == []


def test_an_unknown_table_is_named() -> None:
    path = settings_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text('[shortcut]\nstop = "F1"\n')
    settings, problems = load_settings()
    assert settings == Settings()
    assert problems == [f"{path}:1: shortcut: unknown table, ignored (known: shortcuts, "
                        "behaviour, appearance, checkpoints, limits, notifications, agents, mcp, "
                        "attachments, remote, hosts)"]


def test_the_theme_is_read_checked_and_saved() -> None:
    path = settings_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text('[appearance]\ntheme = "dark"\n')
    settings, problems = load_settings()
    assert problems == [] and settings.theme == "dark"
    path.write_text('[appearance]\ntheme = "purple"\n')
    settings, problems = load_settings()
    assert settings.theme == "system"
    assert len(problems) == 1 and "theme" in problems[0] and "'purple'" in problems[0]
    path.write_text("# mine\n")
    save_settings(replace(Settings(), theme="light"))
    assert path.read_text().startswith("# mine") and 'theme = "light"' in path.read_text()
    assert load_settings()[0].theme == "light"


def test_attachment_caps_are_read_and_checked() -> None:
    path = settings_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("[attachments]\nmax_file_mb = 5\nmax_chat_mb = 0\n")
    settings, problems = load_settings()
    assert settings.attach_limits().max_file == 5 * 1024 * 1024
    assert settings.attach_max_chat_mb == Settings().attach_max_chat_mb  # 0: refused
    assert len(problems) == 1 and "attachments.max_chat_mb: must be a number of MB (more than 0)" in problems[0]
