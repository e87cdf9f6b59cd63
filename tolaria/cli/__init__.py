"""The command line (`tolaria ...`)."""
