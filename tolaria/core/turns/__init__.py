"""One turn of an agent: the runner chooses the turn kind (CLI process, stream input, kept process, ACP, model chat)."""
