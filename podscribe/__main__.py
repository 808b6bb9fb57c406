"""``python -m podscribe``: the ``podscribe`` console script, as ``python -m pipeline.cli`` is."""

from pipeline.cli import main

main(prog_name="podscribe")
