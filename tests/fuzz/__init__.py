"""Mutation fuzz harness for the kvrules CLI (see README.md in this folder)."""
