"""The evaluation boundary: a backend runs a compiled policy over one cell's facts.

``events`` is the engine-neutral record of what happened (rules fired, facts derived,
failures); ``durable`` is the only package that imports durable-rules or knows how
facts are encoded for it.
"""
