"""The explorer's parts: rollout engines (transformers generate; vLLM later), workflows that turn a
task into scored experiences, reward functions, and the runner that drives a batch of tasks over the
engines with retries and timeouts. Workflow and reward names are looked up in
`trinity.config.plugins`, which is torch-free, so validation checks them before Ray starts.
"""
