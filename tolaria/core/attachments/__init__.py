"""Attachments (issue 26, ADR 0028): a file checked at attach time, kept content-addressed and
private in the data folder, linked to its turn in the store, and sent to each agent in its own
form. No Qt."""
