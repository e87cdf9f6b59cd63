"""Lowest layer: paths, TOML files, crash reports, secret redaction. Imports nothing else of Tolaria."""
