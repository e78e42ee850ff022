"""Command-line edge (typer + rich)."""
