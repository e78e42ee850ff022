"""Cost terms: pure functions over layout arrays (no I/O, no printing)."""
