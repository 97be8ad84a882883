"""trinity: reinforcement fine-tuning of language models, configured with Hydra and run on Ray."""

__version__ = "0.1.0"
