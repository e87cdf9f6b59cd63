"""One conversation on screen: its pane (transcript, composer, Send/Stop), the header with the
agent picker, its open questions, and the stack of opened chats."""
