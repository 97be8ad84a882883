"""Workflows: a task and an engine in, scored experiences out (see `base.Workflow`)."""
