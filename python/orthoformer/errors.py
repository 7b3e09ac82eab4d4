"""The package's own exceptions; the library's errors arrive as ``ValueError`` (bad input,
files, configs) and ``OSError`` (I/O), ``MemoryError`` for sizes no machine can allocate."""

#: The exit status of a training run interrupted by SIGINT or SIGTERM after writing its
#: checkpoint: ``EX_TEMPFAIL`` of ``sysexits.h`` ("try again later"), so that a scheduler
#: can tell a pre-empted run, to be resumed with ``--resume``, from a usage error (2).
EXIT_INTERRUPTED = 75


class TrainingStopped(Exception):
    """Training stopped: a non-finite loss or gradient (the last good checkpoint is kept), or
    an interrupt (:class:`Interrupted`: a checkpoint was written)."""


class Interrupted(TrainingStopped):
    """Training was interrupted (SIGINT, SIGTERM) and wrote a checkpoint: resumable; the
    command line exits with :data:`EXIT_INTERRUPTED`."""
