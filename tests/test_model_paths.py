"""Where the weights and data of a job are, as the driver hands them on: any HF directory by path with the
default model group, and every local path absolute, whatever the driver's working directory."""

import shutil

from tests.conftest import validated
from trinity.config.model import ModelConfig, TinyModelConfig
from trinity.model.tiny import ensure_tiny_model


def test_a_model_path_alone_trains_that_directory_not_the_tiny_build(tmp_path):
    """The default group is model=tiny; naming a directory replaces the build, keeping every other setting."""
    directory = tmp_path / "my-model"
    shutil.copytree(ensure_tiny_model(validated().configs[0].model), directory)
    config = validated(f"model.model_path={directory}", "model.temperature=0.7").configs[0]
    assert type(config.model) is ModelConfig
    assert config.model.model_path == str(directory) == config.explorer.rollout_model.model_path
    assert config.model.critic_model_path == str(directory) and config.model.temperature == 0.7
    assert type(validated().configs[0].model) is TinyModelConfig


def test_relative_paths_leave_the_driver_absolute(tmp_path, monkeypatch):
    """Actors on other nodes (and Ray's workers here) run in other working directories."""
    model = tmp_path / "models" / "mine"
    shutil.copytree(ensure_tiny_model(validated().configs[0].model), model)
    (tmp_path / "tasks.jsonl").write_text('{"question": "1+1=", "answer": "2"}\n')
    (tmp_path / "template.jinja").write_text("{{ messages[0]['content'] }}")
    monkeypatch.chdir(tmp_path)
    config = validated(
        "checkpoint_root_dir=runs",
        "model.model_path=models/mine",
        "model.chat_template_path=template.jinja",
        "buffer.explorer_input.taskset.path=tasks.jsonl",
        "buffer.explorer_input.eval_tasksets=[{name:held_out,path:./tasks.jsonl}]",
        "buffer.trainer_input.experience_buffer.storage_type=sql",
        "buffer.trainer_input.experience_buffer.path=sqlite:///buffer.db",
    ).configs[0]
    inputs = config.buffer.explorer_input
    assert config.checkpoint_root_dir == str(tmp_path / "runs")
    assert config.model.model_path == str(model) == config.explorer.rollout_model.model_path
    assert config.model.chat_template_path == str(tmp_path / "template.jinja")
    assert inputs.taskset.path == inputs.eval_tasksets[0].path == str(tmp_path / "tasks.jsonl")
    assert config.buffer.trainer_input.experience_buffer.path == f"sqlite:///{tmp_path / 'buffer.db'}"


def test_hub_names_and_database_urls_stay_as_given(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    config = validated(
        "buffer.trainer_input.experience_buffer.storage_type=sql",
        "buffer.trainer_input.experience_buffer.path=postgresql://db.example/trinity",
    ).configs[0]
    assert config.buffer.trainer_input.experience_buffer.path == "postgresql://db.example/trinity"
    hub = validated("model=qwen2.5-0.5b-instruct", "cluster.cpu_devices_per_node=2").configs[0].model
    assert hub.model_path == "Qwen/Qwen2.5-0.5B-Instruct"
