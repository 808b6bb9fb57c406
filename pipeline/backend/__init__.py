"""What podscribe borrows below its libraries' public API, in one place.

- ``quantize.py``: every int8 linear layer (``quantize(model, kind)``), the only user of ``torch.ao``;
- ``hf_internals.py``: every patch of transformers' internals, each checked at its first use.
"""
