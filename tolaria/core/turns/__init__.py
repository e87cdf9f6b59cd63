"""One turn of an agent. ``runner`` chooses the turn kind and is imported by no turn module.

request (RunRequest) and spawn (ExitProtocol, build_env) are leaves; process_turn is the base of
every turn with a process (one wind down); cli_turn < stream_input < kept_claude and acp/turn <
acp/kept are the kinds; a kept turn *has* a kept_turn.KeptProcess over a keeper.KeeperPool;
model_turn runs a direct model chat.
"""
