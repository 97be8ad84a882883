"""Experiences, the batches built from them, and the storages that carry them to the trainer.

Where to look (nothing heavy is imported here):
  experience.py, batch.py      the Experience record and padded-batch collation
  factory.py                   make_writer / make_reader / make_dataset_reader / trainer_reader
  base.py, errors.py           the writer/reader interface and its errors
  queue_storage.py, queue_io.py, pools.py, priority.py    queue buffer (Ray actor), replay priorities
  jsonl.py                     file buffer;  sql_engine.py, sql_io.py: sql buffer
  task.py, taskset.py, sql_tasks.py, cursor.py, hf_data.py    tasksets for the explorer
  dataset_reader.py, dataset_rows.py, chat.py                 sft/dpo datasets for the trainer
"""
