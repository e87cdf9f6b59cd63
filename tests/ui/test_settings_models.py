"""Preferences > Agents, a model endpoint: the model list comes from the endpoint itself, and the
chosen model is what the next chat turn asks for."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fakes.fake_openai_server import FakeOpenAIServer, text_reply
from PySide6.QtWidgets import QComboBox, QLineEdit, QPushButton
from pytestqt.qtbot import QtBot
from ui.settingshelpers import (
    child,
    close_preferences,
    open_preferences,
    pick_agent,
    select_agent,
    type_into,
)
from ui.uihelpers import StartApp

from tolaria.config.agents import load_overrides
from tolaria.ui.settings.custom_agent_dialog import CustomAgentDialog


@pytest.fixture
def server() -> Iterator[FakeOpenAIServer]:
    srv = FakeOpenAIServer(models=["alpha-1", "beta-2"]).start()
    yield srv
    srv.stop()


def test_list_models_and_use_the_chosen_one(
        start_app: StartApp, qtbot: QtBot, server: FakeOpenAIServer) -> None:
    drv = start_app()
    dialog = open_preferences(drv)
    child(dialog, QPushButton, "addAgentButton").click()
    custom = dialog.findChild(CustomAgentDialog, "customAgentDialog")
    assert custom is not None
    type_into(child(custom, QLineEdit, "custom_id"), "local-llm")
    type_into(child(custom, QLineEdit, "custom_name"), "Local LLM")
    protocol = child(custom, QComboBox, "customProtocol")
    protocol.setCurrentIndex(protocol.findText("openai-chat"))
    type_into(child(custom, QLineEdit, "custom_base_url"), server.base_url)
    type_into(child(custom, QLineEdit, "custom_model"), "alpha-1")
    save = child(custom, QPushButton, "customAgentSave")
    assert save.isEnabled(), [e.text() for e in custom.errors.values() if e.text()]
    save.click()
    qtbot.waitUntil(lambda: not custom.isVisible())

    select_agent(dialog, "local-llm")
    models_button = child(dialog, QPushButton, "agentModelsButton")
    assert not models_button.isHidden()
    models_button.click()
    model = child(dialog, QComboBox, "agentModel")
    qtbot.waitUntil(lambda: model.count() == 2, timeout=10_000)
    assert [model.itemText(i) for i in range(model.count())] == ["alpha-1", "beta-2"]
    model.setCurrentIndex(1)
    child(dialog, QPushButton, "settingsSave").click()
    assert load_overrides()[0]["local-llm"].model == "beta-2"
    close_preferences(drv, dialog, qtbot)

    pick_agent(drv, "local-llm")
    server.script(text_reply("hi from beta"))
    drv.send("hello")
    turn = drv.wait_finished()
    assert turn.status == "completed", turn.text()
    assert server.requests[-1].body["model"] == "beta-2"
