"""Every log a storage-engine test opens is closed when the test ends.

Recovery tests drop a log without closing it to stand for a crash, and many tests simply end
with their log open; without this, a run keeps every segment, index and snapshot file open
(about 1,400), which a machine whose open-files limit is 1,024 would not survive.
"""
from __future__ import annotations

import pytest

from services.storage_node.log import PartitionLog


@pytest.fixture(autouse=True)
def _close_logs_after_the_test(monkeypatch):
    opened: list[PartitionLog] = []
    init = PartitionLog.__init__

    def tracking_init(self, *args, **kwargs):
        init(self, *args, **kwargs)
        opened.append(self)

    monkeypatch.setattr(PartitionLog, "__init__", tracking_init)
    yield
    for plog in opened:
        plog.abandon()  # closes the files without writing: the test may have cut them up
