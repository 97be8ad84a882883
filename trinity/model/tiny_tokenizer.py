"""Tokenizers for the locally built tiny model, made with the `tokenizers` library (no download).

`char`: one token per printable ASCII character (plus tab and newline), so ASCII text
round-trips exactly and arithmetic prompts stay a handful of tokens (other characters become
`<|unk|>`). `bpe`: byte-level BPE trained
on a small built-in corpus, so any text round-trips and common pieces merge.

Both carry the same special tokens (end of text, padding, unknown, and ChatML turn markers) and a
ChatML-style chat template, written into `tokenizer_config.json` with the generic fast tokenizer
class. transformers 5 still picks the architecture's own class for some configs (Qwen2Tokenizer for
Qwen2, rebuilt from the vocabulary with a byte-level pipeline, which dropped the spaces of a plain
character vocabulary), so both tokenizers use byte-level symbols and round-trip under either class.
"""

import json
import string
from pathlib import Path
from typing import Dict, List

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

EOS = "<|endoftext|>"
PAD = "<|pad|>"
UNK = "<|unk|>"
IM_START = "<|im_start|>"
IM_END = "<|im_end|>"
SPECIAL_TOKENS = [EOS, PAD, UNK, IM_START, IM_END]

# ChatML: every message is `<|im_start|>role\ncontent<|im_end|>\n`; the generation prompt opens an assistant turn.
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)

CHARACTERS = "\t\n" + "".join(chr(code) for code in range(32, 127))


def _corpus() -> List[str]:
    """What the BPE learns its merges from: arithmetic, chat turns and plain English."""
    lines = [f"{a}+{b}={a + b}" for a in range(0, 100, 3) for b in range(0, 100, 7)]
    lines += [f"{a}-{b}={a - b}" for a in range(0, 100, 7) for b in range(0, 100, 11)]
    lines += [f"{a}*{b}={a * b}" for a in range(13) for b in range(13)]
    lines += [
        f"{IM_START}user\nWhat is {a}+{b}?{IM_END}\n{IM_START}assistant\n{a + b}{IM_END}"
        for a in range(20)
        for b in range(5)
    ]
    lines += [
        "The quick brown fox jumps over the lazy dog.",
        "Think step by step, then give the final answer.",
        "The answer is 42. Wrong, try again. Correct!",
        string.ascii_letters + string.digits + string.punctuation,
    ] * 20
    return lines


def build_char_tokenizer() -> Tokenizer:
    """One token per character, in byte-level form (space is stored as its byte-level symbol).

    Byte-level form makes the pipeline the same one Qwen2's tokenizer class rebuilds from the
    vocabulary, so text round-trips whichever class transformers picks for the directory.
    """
    byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    vocab: Dict[str, int] = {token: index for index, token in enumerate(SPECIAL_TOKENS)}
    for char in CHARACTERS:
        ((symbol, _),) = byte_level.pre_tokenize_str(char)
        vocab[symbol] = len(vocab)
    # BPE without merges splits every piece into single symbols.
    tokenizer = Tokenizer(models.BPE(vocab=vocab, merges=[], unk_token=UNK))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.add_special_tokens(SPECIAL_TOKENS)
    return tokenizer


def build_bpe_tokenizer(vocab_size: int) -> Tokenizer:
    tokenizer = Tokenizer(models.BPE(unk_token=UNK))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(_corpus(), trainer=trainer)
    return tokenizer


def build_tokenizer(kind: str, bpe_vocab_size: int) -> Tokenizer:
    if kind == "char":
        return build_char_tokenizer()
    if kind == "bpe":
        return build_bpe_tokenizer(bpe_vocab_size)
    raise ValueError(f"unknown tiny tokenizer {kind!r}: use char or bpe")


def save_tokenizer(tokenizer: Tokenizer, directory: Path, model_max_length: int) -> None:
    """tokenizer.json plus the transformers-side config (special tokens, chat template, class)."""
    tokenizer.save(str(directory / "tokenizer.json"))
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "eos_token": EOS,
        "pad_token": PAD,
        "unk_token": UNK,
        "bos_token": None,
        "additional_special_tokens": [IM_START, IM_END],
        "chat_template": CHAT_TEMPLATE,
        "clean_up_tokenization_spaces": False,
        "model_max_length": model_max_length,
        "padding_side": "left",
    }
    (directory / "tokenizer_config.json").write_text(json.dumps(config, indent=2) + "\n")
    special = {"eos_token": EOS, "pad_token": PAD, "unk_token": UNK, "additional_special_tokens": [IM_START, IM_END]}
    (directory / "special_tokens_map.json").write_text(json.dumps(special, indent=2) + "\n")
