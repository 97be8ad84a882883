"""Taskset readers over real jsonl/parquet files and a dataset in a local HF cache: batching, epochs vs
total_steps, resume mid-epoch, eval passes, row formats."""

import json
import shutil
from pathlib import Path

import datasets
import datasets.config
import pytest

from trinity.buffer.errors import BufferExhausted
from trinity.buffer.taskset import TasksetReader, eval_taskset_readers, train_taskset_reader
from trinity.config import compose, validate
from trinity.config.buffer import PromptType, RolloutArgs, TaskFormatConfig, TasksetConfig

ROWS = [{"question": f"{i}+1=?", "answer": str(i + 1), "level": i % 3} for i in range(10)]


def write_jsonl(path: Path, rows) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def taskset(path, **changes) -> TasksetConfig:
    fields = {"name": "math", "path": str(path), "workflow_type": "math_workflow", "reward_fn_type": "math_reward"}
    return TasksetConfig(**{**fields, **changes})


def indices(batch):
    return [task.index for task in batch]


@pytest.fixture
def jsonl(tmp_path) -> Path:
    return write_jsonl(tmp_path / "tasks.jsonl", ROWS)


def test_tasks_carry_the_row_and_its_settings(jsonl):
    cfg = taskset(jsonl, rollout_args=RolloutArgs(temperature=0.7, n=4), workflow_args={"k": 1})
    reader = TasksetReader(cfg, batch_size=3)
    task = reader.read()[1]
    assert task.raw == ROWS[1] and task.prompt == "1+1=?" and task.answer == "2" and task.messages is None
    assert (task.workflow_type, task.reward_fn_type, task.workflow_args) == ("math_workflow", "math_reward", {"k": 1})
    assert task.rollout_args.temperature == 0.7 and task.repeat_times == 4
    assert (task.taskset, task.index, task.epoch, task.task_id, task.is_eval) == ("math", 1, 0, "1", False)


def test_epochs_serve_full_batches_across_epoch_boundaries(jsonl):
    reader = TasksetReader(taskset(jsonl), batch_size=4, total_epochs=2)
    batches = [indices(b) for b in reader]
    # 20 samples -> 5 full batches; the third one wraps into the second epoch
    assert batches == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 0, 1], [2, 3, 4, 5], [6, 7, 8, 9]]
    with pytest.raises(BufferExhausted):
        reader.read()
    assert reader.state_dict() == {"current_index": 20}


def test_total_steps_ignores_epochs_and_wraps(jsonl):
    reader = TasksetReader(taskset(jsonl), batch_size=4, total_epochs=1, total_steps=4)
    batches = list(reader)
    assert [indices(b) for b in batches] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 0, 1], [2, 3, 4, 5]]
    assert [t.epoch for t in batches[2]] == [0, 0, 1, 1]


def test_last_partial_batch_is_dropped_in_training(jsonl):
    assert [len(b) for b in TasksetReader(taskset(jsonl), batch_size=4, total_epochs=1)] == [4, 4]


def test_resume_mid_epoch_continues_without_gap_or_repeat(tmp_path):
    parquet = tmp_path / "tasks.parquet"
    datasets.Dataset.from_list(ROWS).to_parquet(str(parquet))
    first = TasksetReader(taskset(parquet), batch_size=3, total_epochs=2)
    seen = indices(first.read()) + indices(first.read())
    state = json.loads(json.dumps(first.state_dict()))
    assert state == {"current_index": 6}
    resumed = TasksetReader(taskset(parquet), batch_size=3, total_epochs=2)
    resumed.load_state_dict(state)
    rest = [i for batch in resumed for i in indices(batch)]
    assert seen + rest == list(range(10)) + list(range(8))  # 20 samples, 6 full batches of 3


def test_eval_reads_one_pass_with_a_short_last_batch(jsonl):
    reader = TasksetReader(taskset(jsonl), batch_size=4, total_steps=100, is_eval=True)
    batches = list(reader)
    assert [indices(b) for b in batches] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    assert all(t.is_eval for b in batches for t in b)


def test_messages_rows_system_prompt_and_per_row_workflow(tmp_path):
    rows = [
        {"chat": [{"role": "user", "content": "2*3?"}], "sol": "6", "wf": "custom_flow", "rf": ""},
        {
            "chat": json.dumps([{"role": "system", "content": "own"}, {"role": "user", "content": "1?"}]),
            "sol": "1",
            "wf": "",
            "rf": "strict",
        },
    ]
    fmt = TaskFormatConfig(
        prompt_type=PromptType.messages,
        prompt_key="chat",
        response_key="sol",
        system_prompt="Be brief.",
        workflow_key="wf",
        reward_fn_key="rf",
    )
    first, second = TasksetReader(taskset(write_jsonl(tmp_path / "chat.jsonl", rows), format=fmt), 2).read()
    assert first.messages == [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "2*3?"}]
    assert second.messages[0] == {"role": "system", "content": "own"} and len(second.messages) == 2
    assert (first.workflow_type, first.reward_fn_type) == ("custom_flow", "math_reward")
    assert (second.workflow_type, second.reward_fn_type) == ("math_workflow", "strict")
    assert first.prompt is None and first.answer == "6"


def test_directory_with_splits(tmp_path):
    write_jsonl(tmp_path / "train.jsonl", ROWS[:6])
    write_jsonl(tmp_path / "test.jsonl", ROWS[6:])
    reader = TasksetReader(taskset(tmp_path, split="test"), batch_size=4, is_eval=True)
    assert [t.raw["question"] for t in reader.read()] == [r["question"] for r in ROWS[6:]]


def test_dataset_name_from_the_local_hf_cache(tmp_path, jsonl, monkeypatch):
    builder = datasets.load_dataset_builder("json", data_files={"train": str(jsonl)}, cache_dir=str(tmp_path / "b"))
    builder.download_and_prepare()
    cached = tmp_path / "cache" / "local_org___tiny_math" / "default" / "0.0.0" / Path(builder.cache_dir).name
    cached.mkdir(parents=True)
    for file in Path(builder.cache_dir).iterdir():
        shutil.copy(file, cached / file.name.replace("json-", "tiny_math-"))
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", str(tmp_path / "cache"))
    reader = TasksetReader(taskset("local_org/tiny_math"), batch_size=5)
    assert len(reader) == 10 and reader.read()[4].answer == "5"


def test_bad_inputs_are_clear_errors(tmp_path, jsonl):
    with pytest.raises(ValueError, match=r"not a dataset in the local HF cache .* never downloads"):
        TasksetReader(taskset("nobody/not_cached_anywhere"), batch_size=2)
    with pytest.raises(ValueError, match="no such file"):
        TasksetReader(taskset(tmp_path / "missing.jsonl"), batch_size=2)
    with pytest.raises(ValueError, match=r"column 'prompt' is not in .*columns: \['question', 'answer', 'level'\]"):
        TasksetReader(taskset(jsonl, format=TaskFormatConfig(prompt_key="prompt")), batch_size=2)
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    with pytest.raises(ValueError, match="cannot load|has no rows"):
        TasksetReader(taskset(empty), batch_size=2)
    bad_chat = write_jsonl(tmp_path / "bad.jsonl", [{"question": "not a chat", "answer": "1"}])
    reader = TasksetReader(taskset(bad_chat, format=TaskFormatConfig(prompt_type=PromptType.messages)), 1)
    with pytest.raises(ValueError, match="row 0 column 'question': not a chat list"):
        reader.read()


def test_readers_from_a_validated_config(tmp_path, jsonl):
    config = validate(
        compose(
            [
                f"checkpoint_root_dir={tmp_path}",
                "stages=[]",
                f"buffer.explorer_input.taskset.path={jsonl}",
                "buffer.batch_size=4",
                "buffer.total_steps=3",
                f"+buffer.explorer_input.eval_tasksets=[{{name: held_out, path: '{jsonl}'}}]",
            ]
        )
    ).configs[0]
    train = train_taskset_reader(config)
    assert [len(b) for b in train] == [4, 4, 4]
    (held_out,) = eval_taskset_readers(config)
    batches = list(held_out)
    assert [len(b) for b in batches] == [4, 4, 2] and batches[0][0].rollout_args.n == 1
    assert batches[0][0].workflow_type == config.buffer.explorer_input.default_eval_workflow_type


def test_sql_taskset_reads_its_table_in_order(tmp_path):
    from trinity.buffer.sql_tasks import write_tasks
    from trinity.config.buffer import StorageType

    url = f"sqlite:///{tmp_path / 'tasks.db'}"
    write_tasks(url, "math", ROWS[:4])
    write_tasks(url, "math", ROWS[4:])
    reader = TasksetReader(taskset(url, storage_type=StorageType.sql), batch_size=5)
    assert [t.raw for t in reader.read()] == ROWS[:5]
    with pytest.raises(ValueError, match="has no table 'other'"):
        TasksetReader(taskset(url, storage_type=StorageType.sql, name="other"), batch_size=5)
