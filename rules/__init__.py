"""The shipped default policy (YAML rule files), loaded as package data."""
