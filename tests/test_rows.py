"""The row shapes (pipeline/facts/rows.py) against the tables' Arrow schemas (pipeline/storage/tables.py): each TypedDict's keys
are its schema's field names, in order, so a column added to a schema and not to its shape fails here. No model."""

from __future__ import annotations

import pyarrow as pa

from pipeline.facts import rows
from pipeline.storage import tables


def _names(struct_or_schema) -> list[str]:
    return [field.name for field in struct_or_schema]


def test_each_row_shape_has_exactly_its_schemas_columns():
    redecode = tables.PIECES_SCHEMA.field("redecodes").type.value_type
    for shape, columns in (
        (rows.SegmentRow, _names(tables.SEGMENTS_SCHEMA)),
        (rows.PieceRow, _names(tables.PIECES_SCHEMA)),
        (rows.WordRow, _names(tables.WORD)),
        (rows.RedecodeRow, _names(redecode)),
    ):
        assert list(shape.__annotations__) == columns, shape.__name__
    assert tables.SEGMENTS_SCHEMA.field("words").type == pa.list_(tables.WORD)
