"""Errors a buffer raises; each message names the buffer so a stalled run says who is starving it."""


class BufferExhausted(Exception):
    """No more data will come: a finite dataset is used up, or a closed queue is drained.

    Deliberately not a StopIteration: one raised inside a coroutine or generator becomes a RuntimeError.
    Readers are also iterators whose loop simply ends on it.
    """


class BufferClosed(BufferExhausted):
    """The last writer released the queue and a reader drained it (end of stream); writing to it fails too."""


class BufferTimeout(TimeoutError):
    """A read (or a write to a full queue) did not complete in time; nothing was consumed or lost."""


class BufferStorageError(RuntimeError):
    """A storage operation failed after its retries, or stored data is corrupt."""
