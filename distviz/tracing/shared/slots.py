"""Slots for ``--max-contexts`` (torch-free): one count over every process of a traced program.

The processes of a program share no memory, so each recorded context claims a slot file in
the session's folder (``slots/0``, ``slots/1``, ...) with ``O_CREAT | O_EXCL``: the file system
gives each slot to exactly one process.
"""

from __future__ import annotations

import os


def claim_slot(folder: str, limit: int) -> bool:
    """Claim one of ``limit`` slots under ``folder/slots``; ``False`` when every slot is taken
    (by this process or another)."""
    os.makedirs(os.path.join(folder, "slots"), exist_ok=True)
    for n in range(limit):
        try:
            os.close(os.open(os.path.join(folder, "slots", str(n)),
                             os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
            return True
        except FileExistsError:
            continue
    return False
