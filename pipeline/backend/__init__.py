"""What podscribe borrows below its libraries' public API, in one place.

- ``quantize.py``: every int8 linear layer (``quantize(model, kind)``), the only user of ``torch.ao``;
- ``hf_internals/``: every patch of transformers' internals, each checked at its first use, one module per
  group (``encoder.py``, ``cache.py``, ``attention.py``, ``asr_pipeline.py``, ``twin.py``: a transformers model
  around podscribe's own modules) with ``PATCHES`` and ``check_all`` in its ``__init__`` (its modules imported
  at first use: the CPU path does not import transformers' modeling stack).
"""
