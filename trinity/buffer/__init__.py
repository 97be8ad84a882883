"""Experiences, the batches built from them, and the storages that carry them to the trainer."""
