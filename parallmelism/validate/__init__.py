"""Validation against published measurements (case files)."""
