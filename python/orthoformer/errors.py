"""The package's own exception; the library's errors arrive as ``ValueError`` (bad input,
files, configs) and ``OSError`` (I/O), ``MemoryError`` for sizes no machine can allocate."""


class TrainingStopped(Exception):
    """Training stopped: a non-finite loss or gradient (the last good checkpoint is kept), or
    an interrupt (a checkpoint was written)."""
