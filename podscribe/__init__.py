"""The distribution's own name as a module: ``python -m podscribe`` is the ``podscribe`` command (the code lives in
``pipeline``)."""
