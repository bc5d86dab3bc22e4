"""The shipped JSON Schemas and the fact catalogue, loaded as package data."""
