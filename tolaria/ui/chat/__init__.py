"""One conversation on screen: its header and agent picker, transcript, composer and questions."""
