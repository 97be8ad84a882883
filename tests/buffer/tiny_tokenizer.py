"""A character-level HF tokenizer with a ChatML-like template, built in memory for the dataset tests.

Each printable ASCII character (and newline) is one token; the chat markers are single special tokens.
"""

import string

from tokenizers import Tokenizer, decoders, models
from transformers import PreTrainedTokenizerFast

SPECIALS = ["<unk>", "<pad>", "<|im_start|>", "<|im_end|>"]
CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def char_tokenizer(chat_template: str = CHAT_TEMPLATE) -> PreTrainedTokenizerFast:
    chars = sorted(set(string.printable) - set("\r\x0b\x0c"))
    vocab = {token: i for i, token in enumerate(SPECIALS + chars)}
    backend = Tokenizer(models.BPE(vocab=vocab, merges=[], unk_token="<unk>"))
    backend.decoder = decoders.Fuse()
    backend.add_special_tokens(SPECIALS)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend, unk_token="<unk>", pad_token="<pad>", eos_token="<|im_end|>"
    )
    tokenizer.chat_template = chat_template
    return tokenizer


def token_count(text: str) -> int:
    """Tokens of `text` counted by hand: one per special marker, one per other character."""
    count = 0
    while text:
        marker = next((s for s in SPECIALS if text.startswith(s)), None)
        text = text[len(marker) :] if marker else text[1:]
        count += 1
    return count
