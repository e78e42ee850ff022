"""Imports the modules that register case kinds beyond memory (step time, inference)."""
