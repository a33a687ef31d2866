"""Operating a node's data dir (issue 30): check it (doctor), salvage a damaged
database (repair), back it up and restore it (an encrypted, authenticated archive).

Rule: these work on the files of a data dir, with the node stopped or running;
they never reach into a running node's objects (the CLI asks a running node
through its API). Outside this package, import only the names below
(``node/face.py``; enforced by ``scripts/check_layers.py``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from node.face import face

if TYPE_CHECKING:
    from node.ops.archive import BackupRefused as BackupRefused
    from node.ops.backup import BackupFailed as BackupFailed
    from node.ops.backup import restore_backup as restore_backup
    from node.ops.backup import take_backup as take_backup
    from node.ops.doctor import FAIL as FAIL
    from node.ops.doctor import OK as OK
    from node.ops.doctor import WARN as WARN
    from node.ops.doctor import Finding as Finding
    from node.ops.doctor import examine as examine
    from node.ops.doctor import repair as repair
    from node.ops.recovery import SalvageFailed as SalvageFailed
    from node.ops.recovery import TableSalvage as TableSalvage
    from node.ops.recovery import salvage as salvage
    from node.ops.schedule import passphrase_for as passphrase_for
    from node.ops.schedule import prune as prune
    from node.ops.schedule import run_scheduled_backups as run_scheduled_backups
    from node.ops.schedule import scheduled_backups as scheduled_backups
    from node.ops.wal import WalReport as WalReport
    from node.ops.wal import read_wal as read_wal

__getattr__ = face(__name__)
