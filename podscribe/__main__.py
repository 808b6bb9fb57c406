"""``python -m podscribe``: the ``podscribe`` console script, as ``python -m pipeline.cli`` is."""

from pipeline.cli import console

console(prog_name="podscribe")
