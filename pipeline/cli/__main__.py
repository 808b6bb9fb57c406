"""``python -m pipeline.cli``: the ``podscribe`` console script."""

from . import console

console()
