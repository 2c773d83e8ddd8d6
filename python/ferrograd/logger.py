"""MegEngine's ``megengine.logger``: training scripts call ``get_logger()`` at import time and
``set_log_file(path)`` to copy the log into a file. Loggers are standard :mod:`logging`
loggers writing ``[day time] message`` lines to stderr (and to the log file when one is
set); warnings and errors are marked as such."""

from __future__ import annotations

import logging
import os
import sys
from typing import IO, Any

_loggers: list[logging.Logger] = []
_level = logging.getLevelName(os.environ.get("MEGENGINE_LOGGING_LEVEL", "INFO").upper())
if not isinstance(_level, int):
    _level = logging.INFO


class _Formatter(logging.Formatter):
    """Formats records for the console and writes each one to the log file too."""

    log_fout: IO[str] | None = None

    def format(self, record: logging.LogRecord) -> str:
        date = self.formatTime(record, self.datefmt)
        body = record.getMessage()
        if record.exc_info:
            body += "\n" + self.formatException(record.exc_info)
        tag = ""
        if record.levelno >= logging.ERROR:
            tag = "ERR "
        elif record.levelno >= logging.WARNING:
            tag = "WRN "
        elif record.levelno < logging.INFO:
            tag = "DBG "
        line = f"[{date}] {tag}{body}"
        fout = _Formatter.log_fout
        if fout is not None:
            fout.write(f"[{date} {record.lineno}@{record.filename}:{record.name}] {tag}{body}\n")
            fout.flush()
        return line


def set_log_file(fout: str | IO[str], mode: str = "a") -> None:
    """Copies every later log line into ``fout`` (a path, opened with ``mode``, or an open
    text file)."""
    if isinstance(fout, (str, os.PathLike)):
        fout = open(fout, mode)  # noqa: SIM115 (kept open for the process's lifetime)
    _Formatter.log_fout = fout


def get_logger(name: str | None = None, formatter: Any = _Formatter) -> logging.Logger:
    """The logger called ``name``, set up once: the default level
    (``$MEGENGINE_LOGGING_LEVEL`` or INFO), one stderr handler, no propagation to the root
    logger (so lines are not printed twice)."""
    logger = logging.getLogger(name)
    if getattr(logger, "_ferrograd_ready", False):
        return logger
    logger._ferrograd_ready = True  # type: ignore[attr-defined]
    logger.propagate = False
    logger.setLevel(_level)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(formatter(datefmt="%d %H:%M:%S"))
    logger.handlers[:] = [handler]
    _loggers.append(logger)
    return logger


def set_log_level(level: int | str, update_existing: bool = True) -> int:
    """Sets the level of loggers made from now on (and of those made already, unless
    ``update_existing`` is False); returns the previous level."""
    global _level
    if isinstance(level, str):
        names = {"CRITICAL": 50, "FATAL": 50, "ERROR": 40, "WARN": 30, "WARNING": 30}
        names.update({"INFO": 20, "DEBUG": 10, "NOTSET": 0})
        if level.upper() not in names:
            raise ValueError(f"set_log_level: unknown level {level!r}")
        level = names[level.upper()]
    old, _level = _level, level
    if update_existing:
        for logger in _loggers:
            logger.setLevel(level)
    return old


def enable_debug_log() -> None:
    """Logs everything from DEBUG up."""
    set_log_level(logging.DEBUG)


__all__ = ["enable_debug_log", "get_logger", "set_log_file", "set_log_level"]
