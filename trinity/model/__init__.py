"""Models: loading any HF causal LM + tokenizer from a local directory or the local HF cache, and the
locally built tiny model that makes every path runnable offline on CPU."""
