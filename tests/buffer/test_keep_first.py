"""A resumed explorer drops the rows its last run wrote after its last committed step (that step is explored
again), so no step reaches the trainer twice: `keep_first` on the real file and SQLite buffers."""

import pytest

from tests.buffer.test_file_buffer import exp, file_buffer
from tests.buffer.test_sql_buffer import sql_buffer, versions
from trinity.buffer.factory import make_reader, make_writer


@pytest.mark.parametrize("buffer", [file_buffer, sql_buffer])
def test_rows_after_the_committed_count_are_dropped_and_the_rest_read_as_before(tmp_path, buffer):
    config = buffer(tmp_path)
    writer = make_writer(config)
    writer.write([exp(v) for v in (1, 2, 3)])
    writer.write([exp(v) for v in (4, 5)])  # a step its run wrote and never committed
    assert writer.keep_first(3) == 2
    assert writer.keep_first(3) == 0 and writer.keep_first(10) == 0  # nothing beyond: nothing to drop
    writer.write([exp(v) for v in (6, 7)])  # the step explored again
    reader = make_reader(config, batch_size=5)
    assert versions(reader.read()) == [1, 2, 3, 6, 7]
    writer.close()


@pytest.mark.parametrize("buffer", [file_buffer, sql_buffer])
def test_keeping_no_rows_empties_the_buffer(tmp_path, buffer):
    config = buffer(tmp_path)
    writer = make_writer(config)
    writer.write([exp(v) for v in (1, 2)])
    assert writer.keep_first(0) == 2
    writer.write([exp(3)])
    assert versions(make_reader(config, batch_size=1).read()) == [3]
    writer.close()


def test_a_torn_tail_is_mended_before_counting(tmp_path):
    config = file_buffer(tmp_path)
    writer = make_writer(config)
    writer.write([exp(v) for v in (1, 2, 3)])
    with open(config.path, "ab") as handle:
        handle.write(b'{"tokens": [1, 2')  # a writer killed mid-line
    assert writer.keep_first(2) == 1
    assert versions(make_reader(config, batch_size=2).read()) == [1, 2]
