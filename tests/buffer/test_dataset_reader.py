"""SFT and DPO dataset rows become experiences with the right prompt length, action mask and truncation.

Expected token counts are computed by hand from the template text (tiny_tokenizer.token_count), not by
the code under test."""

import json

import pytest

from tests.buffer.tiny_tokenizer import char_tokenizer, token_count
from trinity.buffer.batch import collate
from trinity.buffer.dataset_reader import DatasetExperienceReader
from trinity.buffer.errors import BufferExhausted
from trinity.buffer.factory import make_dataset_reader, trainer_reader
from trinity.config import compose, validate
from trinity.config.algorithm import DataSchema
from trinity.config.buffer import DatasetFormatConfig, ExperienceBufferConfig, PromptType, StorageType


def turn(role, content):
    return f"<|im_start|>{role}\n{content}<|im_end|>\n"


GEN = "<|im_start|>assistant\n"


@pytest.fixture(scope="module")
def tokenizer():
    return char_tokenizer()


def dataset(tmp_path, rows, name="data.jsonl", **fmt) -> ExperienceBufferConfig:
    path = tmp_path / name
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return ExperienceBufferConfig(
        name="sft_data", storage_type=StorageType.file, path=str(path), format=DatasetFormatConfig(**fmt)
    )


def decode(tokenizer, ids):
    return tokenizer.decode(ids.tolist() if hasattr(ids, "tolist") else ids)


def test_sft_messages_train_on_the_last_assistant_turn_only(tmp_path, tokenizer):
    chat = [
        {"role": "user", "content": "1+1?"},
        {"role": "assistant", "content": "2"},
        {"role": "user", "content": "and 2+2?"},
        {"role": "assistant", "content": "4, sure"},
    ]
    cfg = dataset(tmp_path, [{"messages": chat}], prompt_type=PromptType.messages, system_prompt="Add.")
    (experience,) = make_dataset_reader(cfg, DataSchema.sft, tokenizer, batch_size=1).read()
    prompt = turn("system", "Add.") + turn("user", "1+1?") + turn("assistant", "2") + turn("user", "and 2+2?") + GEN
    response = "4, sure<|im_end|>\n"
    assert experience.prompt_length == token_count(prompt)
    assert len(experience.tokens) == token_count(prompt) + token_count(response)
    assert decode(tokenizer, experience.tokens[experience.prompt_length :]) == response
    assert decode(tokenizer, experience.tokens[: experience.prompt_length]) == prompt
    assert experience.action_mask.tolist() == [True] * token_count(response)
    assert experience.info == {"truncated": False} and experience.reward is None
    batch = collate([experience], tokenizer.pad_token_id)
    assert batch["response_mask"].sum().item() == token_count(response)


def test_sft_plaintext_and_json_text_chats(tmp_path, tokenizer):
    rows = [{"q": "hi", "a": "hello"}, {"q": "x", "a": "y"}]
    cfg = dataset(tmp_path, rows, prompt_type=PromptType.plaintext, prompt_key="q", response_key="a")
    first, second = make_dataset_reader(cfg, DataSchema.sft, tokenizer, batch_size=2).read()
    # plaintext without a system prompt is raw text, as a plaintext rollout sees it: no chat template
    assert first.prompt_length == token_count("hi") and decode(tokenizer, first.tokens) == "hi" + "hello<|im_end|>"
    assert first.response_length == token_count("hello<|im_end|>") and first.mask().all()
    with_system = dataset(
        tmp_path,
        rows,
        name="s.jsonl",
        prompt_type=PromptType.plaintext,
        prompt_key="q",
        response_key="a",
        system_prompt="Be brief.",
    )
    chat, _ = make_dataset_reader(with_system, DataSchema.sft, tokenizer, batch_size=2).read()
    assert chat.prompt_length == token_count(turn("system", "Be brief.") + turn("user", "hi") + GEN)
    assert (first.task_id, second.task_id, second.batch_id) == ("0", "1", "0")
    text_chat = json.dumps([{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}])
    cfg = dataset(tmp_path, [{"messages": text_chat}], name="text.jsonl", prompt_type=PromptType.messages)
    (experience,) = make_dataset_reader(cfg, DataSchema.sft, tokenizer, batch_size=1).read()
    assert experience.response_length == token_count("a<|im_end|>\n")


def test_dpo_rows_give_chosen_then_rejected_with_a_shared_prompt(tmp_path, tokenizer):
    rows = [
        {"prompt": "2+2?", "chosen": "4", "rejected": "five"},
        {"prompt": "3+3?", "chosen": "6", "rejected": "7"},
    ]
    cfg = dataset(tmp_path, rows, prompt_type=PromptType.plaintext)
    reader = make_dataset_reader(cfg, DataSchema.dpo, tokenizer, batch_size=4)
    batch = reader.read()
    assert [e.info["dpo"] for e in batch] == ["chosen", "rejected", "chosen", "rejected"]
    assert [e.run_id for e in batch] == [0, 1, 0, 1] and batch[0].group_id == batch[1].group_id
    prompt_length = token_count("2+2?")
    assert batch[0].prompt_length == batch[1].prompt_length == prompt_length
    assert batch[0].tokens[:prompt_length].tolist() == batch[1].tokens[:prompt_length].tolist()
    assert decode(tokenizer, batch[1].tokens[prompt_length:]) == "five<|im_end|>"
    assert batch[1].action_mask.tolist() == [True] * token_count("five<|im_end|>")
    assert reader.state_dict() == {"current_index": 2}
    with pytest.raises(ValueError, match="must be even"):
        reader.read(batch_size=3)


def test_dpo_messages_with_answer_message_lists(tmp_path, tokenizer):
    rows = [
        {
            "messages": [{"role": "user", "content": "hi"}],
            "chosen": [{"role": "assistant", "content": "hello"}],
            "rejected": "go away",
        }
    ]
    cfg = dataset(tmp_path, rows, prompt_type=PromptType.messages)
    chosen, rejected = make_dataset_reader(cfg, DataSchema.dpo, tokenizer, batch_size=2).read()
    assert decode(tokenizer, chosen.tokens[chosen.prompt_length :]) == "hello<|im_end|>\n"
    assert decode(tokenizer, rejected.tokens[rejected.prompt_length :]) == "go away<|im_end|>\n"


def test_truncation_keeps_the_prompt_end_and_cuts_the_response(tmp_path, tokenizer):
    cfg = dataset(tmp_path, [{"prompt": "abcdefghij", "response": "klmnopqrst"}], prompt_type=PromptType.plaintext)
    reader = make_dataset_reader(cfg, DataSchema.sft, tokenizer, batch_size=1, max_prompt_tokens=8, max_model_len=12)
    (experience,) = reader.read()
    assert experience.prompt_length == 8 and len(experience.tokens) == 12
    assert decode(tokenizer, experience.tokens[:8]) == "cdefghij"
    assert decode(tokenizer, experience.tokens[8:]) == "klmn" and experience.info["truncated"] is True


def test_epochs_steps_and_resume(tmp_path, tokenizer):
    rows = [{"prompt": f"p{i}", "response": f"r{i}"} for i in range(5)]
    cfg = dataset(tmp_path, rows, prompt_type=PromptType.plaintext)
    reader = DatasetExperienceReader(cfg, DataSchema.sft, tokenizer, batch_size=2, total_epochs=2)
    seen = [e.task_id for e in reader.read()]
    state = reader.state_dict()
    resumed = DatasetExperienceReader(cfg, DataSchema.sft, tokenizer, batch_size=2, total_epochs=2)
    resumed.load_state_dict(state)
    rest = [e.task_id for batch in resumed for e in batch]
    assert seen + rest == [str(i % 5) for i in range(10)]
    with pytest.raises(BufferExhausted):
        resumed.read()
    stepped = DatasetExperienceReader(cfg, DataSchema.sft, tokenizer, batch_size=2, total_steps=4, total_epochs=1)
    assert sum(1 for _ in stepped) == 4


def test_bad_rows_and_settings_are_clear_errors(tmp_path, tokenizer):
    no_answer = [{"messages": [{"role": "user", "content": "hi"}]}]
    cfg = dataset(tmp_path, no_answer, prompt_type=PromptType.messages)
    with pytest.raises(ValueError, match="row 0: the last message must be the assistant's"):
        make_dataset_reader(cfg, DataSchema.sft, tokenizer, batch_size=1).read()
    wrong_columns = dataset(tmp_path, no_answer, name="b.jsonl", prompt_type=PromptType.plaintext)
    with pytest.raises(ValueError, match=r"columns \['prompt', 'response'\] are not in"):
        make_dataset_reader(wrong_columns, DataSchema.sft, tokenizer, batch_size=1)
    with pytest.raises(ValueError, match="a tokenizer is needed"):
        make_dataset_reader(cfg, DataSchema.sft, None, batch_size=1)
    plain = char_tokenizer(chat_template=None)
    chats = dataset(
        tmp_path,
        [{"messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]}],
        name="c.jsonl",
        prompt_type=PromptType.messages,
    )
    with pytest.raises(ValueError, match="no chat template"):
        make_dataset_reader(chats, DataSchema.sft, plain, batch_size=1).read()


def test_trainer_reader_for_sft_and_dpo_configs(tmp_path, tokenizer):
    path = tmp_path / "sft.jsonl"
    path.write_text(json.dumps({"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]}))
    config = validate(
        compose(
            [
                f"checkpoint_root_dir={tmp_path}",
                "stages=[]",
                "algorithm=sft",
                f"buffer.trainer_input.experience_buffer.path={path}",
                "buffer.train_batch_size=2",
                "buffer.total_epochs=2",
            ]
        )
    ).configs[0]
    reader = trainer_reader(config, tokenizer)
    assert isinstance(reader, DatasetExperienceReader) and reader.schema == DataSchema.sft
    batch = reader.read()
    assert len(batch) == 2 and [e.task_id for e in batch] == ["0", "0"] and [e.batch_id for e in batch] == ["0", "1"]
    pairs = tmp_path / "dpo.jsonl"
    pairs.write_text("".join(json.dumps({"prompt": f"q{i}", "chosen": "a", "rejected": "b"}) + "\n" for i in range(3)))
    config = validate(
        compose(
            [
                f"checkpoint_root_dir={tmp_path}",
                "stages=[]",
                "algorithm=dpo",
                f"buffer.trainer_input.experience_buffer.path={pairs}",
                "buffer.train_batch_size=4",
            ]
        )
    ).configs[0]
    batch = trainer_reader(config, tokenizer).read()
    pairs_read = [(e.task_id, e.info["dpo"]) for e in batch]
    assert pairs_read == [("0", "chosen"), ("0", "rejected"), ("1", "chosen"), ("1", "rejected")]
