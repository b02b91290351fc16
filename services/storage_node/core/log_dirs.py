"""Which log dirs may take appends (pure: free space is measured by the shell and passed in).

A log dir is *low* when its free space, as last measured minus the bytes appended since, is below
`log.dir.free.bytes.min`; it is *back* once a measurement shows one and a half times that (so a
dir on the edge does not flap). A low dir refuses appends and its partitions' replicas are
handed to other nodes; unlike a failed dir it stays open, so retention can free space.
"""
from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["DirSpace", "SpaceChange"]

RECOVERY_FACTOR = 1.5


@dataclass
class _Dir:
    free: int | None = None          # bytes free at the last measurement
    appended: int = 0                # bytes appended since
    low: bool = False


@dataclass(frozen=True)
class SpaceChange:
    log_dir: str
    low: bool                        # True: became low; False: back
    free: int


@dataclass
class DirSpace:
    min_free: int
    dirs: dict[str, _Dir] = field(default_factory=dict)

    def _get(self, d: str) -> _Dir:
        st = self.dirs.get(d)
        if st is None:
            st = self.dirs[d] = _Dir()
        return st

    def measured(self, d: str, free: int) -> SpaceChange | None:
        """A fresh measurement of `d`: the change of state it causes, if any."""
        st = self._get(d)
        st.free, st.appended = free, 0
        if self.min_free <= 0:
            return None
        if not st.low and free < self.min_free:
            st.low = True
            return SpaceChange(d, True, free)
        if st.low and free >= self.min_free * RECOVERY_FACTOR:
            st.low = False
            return SpaceChange(d, False, free)
        return None

    def appended(self, d: str, nbytes: int) -> SpaceChange | None:
        """`nbytes` were appended to `d`: it becomes low once the estimate drops below."""
        st = self._get(d)
        st.appended += nbytes
        if self.min_free <= 0 or st.low or st.free is None:
            return None
        estimate = st.free - st.appended
        if estimate < self.min_free:
            st.low = True
            return SpaceChange(d, True, estimate)
        return None

    def is_low(self, d: str) -> bool:
        st = self.dirs.get(d)
        return st is not None and st.low

    def forget(self, d: str) -> None:
        self.dirs.pop(d, None)
