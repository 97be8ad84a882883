"""A train taskset read ahead (in another process, as a job does) serves the tasks the explorer's own read
would; what it cannot carry as plain Arrow data, or a read that failed, is left to the explorer."""

import json
import time

import datasets
import ray

from trinity.buffer.hf_data import plain_table
from trinity.buffer.taskset import read_train_table, train_taskset_reader
from trinity.config import compose, validate
from trinity.explorer.explorer import _read_ahead

ROWS = [
    {
        "question": f"{i}+1=?",
        "answer": str(i + 1),
        "level": i % 3,
        "score": i / 4,
        "tags": ["add"] * (i % 2),
        "meta": {"source": "gen", "hard": i > 6},
        "note": None if i % 3 else "first",
    }
    for i in range(9)
]


def config_for(tmp_path, path, *overrides):
    return validate(
        compose(
            [
                f"checkpoint_root_dir={tmp_path}",
                "stages=[]",
                f"buffer.explorer_input.taskset.path={path}",
                "buffer.batch_size=4",
                "buffer.total_steps=5",
                *overrides,
            ]
        )
    ).configs[0]


def test_a_table_read_ahead_serves_the_tasks_the_reader_reads_itself(tmp_path):
    path = tmp_path / "tasks.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in ROWS))
    config = config_for(
        tmp_path,
        path,
        "buffer.explorer_input.taskset.format.prompt_key=question",
        "buffer.explorer_input.taskset.format.response_key=answer",
    )
    table = read_train_table(config)
    assert table is not None and table.num_rows == len(ROWS)
    ahead, own = train_taskset_reader(config, table=table), train_taskset_reader(config)
    for _ in range(5):  # wraps around the 9 rows
        got, expected = ahead.read(), own.read()
        assert [(t.raw, t.prompt, t.answer, t.index, t.epoch) for t in got] == [
            (t.raw, t.prompt, t.answer, t.index, t.epoch) for t in expected
        ]
    assert got[0].raw["meta"] == {"source": "gen", "hard": got[0].index > 6}
    assert ahead.state_dict() == own.state_dict()


def test_decoded_columns_and_large_tables_are_left_to_the_reader():
    image = datasets.Dataset.from_dict(
        {"image": [None], "q": ["a"]},
        features=datasets.Features({"image": datasets.Image(), "q": datasets.Value("string")}),
    )
    assert plain_table(image, 1 << 20) is None
    selected = datasets.Dataset.from_dict({"q": ["a", "b", "c"], "n": [1, 2, 3]}).select([2, 0])
    assert plain_table(selected, 1 << 20).to_pylist() == [{"q": "c", "n": 3}, {"q": "a", "n": 1}]
    assert plain_table(selected, 8) is None


def test_an_sql_taskset_is_read_by_the_explorer(tmp_path):
    from trinity.buffer.sql_tasks import write_tasks

    url = f"sqlite:///{tmp_path / 'tasks.db'}"
    write_tasks(url, "arithmetic", ROWS[:4])
    assert read_train_table(config_for(tmp_path, url, "buffer.explorer_input.taskset.storage_type=sql")) is None


def test_the_explorer_reads_itself_when_the_read_ahead_failed_or_is_late(ray_cluster):
    @ray.remote(max_retries=0)
    def read(outcome):
        if outcome == "fails":
            raise ValueError("a malformed line")
        if outcome == "late":
            time.sleep(30)
        return "rows"

    assert _read_ahead([read.remote("reads")], timeout=30) == "rows"
    assert _read_ahead([read.remote("fails")], timeout=30) is None
    assert _read_ahead([read.remote("late")], timeout=0.5) is None
    assert _read_ahead(None, timeout=1) is None and _read_ahead([None], timeout=1) is None
