"""Files the portal writes are private to its account: 0600 for files, 0700 for directories.

Registered datasets, shards and their manifest, the SQLite database, reports, the demo users'
passwords: none of them is meant for other accounts on the machine. One process-wide umask
(``restrict_new_files``, set by the settings every entry point loads: manage.py, the WSGI server,
Celery, pytest) makes everything these processes and their children (the local trainer) create
private, whichever library writes it (shutil, pyarrow, SQLite). ``private_dir`` also tightens a
directory that existed before, and ``write_private_text`` creates a file 0600 whatever the umask.
"""

from __future__ import annotations

import os
from pathlib import Path

PRIVATE_UMASK = 0o077
FILE_MODE = 0o600
DIR_MODE = 0o700


def restrict_new_files() -> int:
    """Set the process's umask so that new files are 0600 and new directories 0700; returns the old one."""
    return os.umask(PRIVATE_UMASK)


def private_dir(path: str | os.PathLike[str]) -> Path:
    """Create ``path`` (and its missing parents) 0700, and make it 0700 if it existed already."""
    directory = Path(path)
    directory.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
    if directory.stat().st_mode & 0o777 != DIR_MODE:
        directory.chmod(DIR_MODE)
    return directory


def write_private_text(path: str | os.PathLike[str], text: str) -> Path:
    """Write ``text`` to ``path`` as a 0600 file (replacing it), even under a looser umask."""
    target = Path(path)
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, FILE_MODE)
    try:
        os.fchmod(fd, FILE_MODE)  # an existing file keeps its mode through O_CREAT
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            fd = -1
            handle.write(text)
    finally:
        if fd != -1:
            os.close(fd)
    return target
