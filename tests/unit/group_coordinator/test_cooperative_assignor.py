"""cooperative-sticky (KIP-429): the first round withholds moving partitions, owners keep the
rest, the second round (after the owners revoked) completes a valid, balanced assignment."""
from collections import Counter

from hypothesis import given, settings, strategies as st

from riverbed.coordinator.assignors import COOPERATIVE, assign, current_owners
from riverbed.coordinator.consumer_protocol import Subscription

T = "t"


def owned(**tps_by_member):
    return {m: Subscription((T,), None, tuple((T, p) for p in ps)) for m, ps in tps_by_member.items()}


def test_a_fourth_member_gets_nothing_owned_by_others_in_the_first_round():
    # three members own 12 partitions, 4 each; d joins
    subs = owned(a=range(0, 4), b=range(4, 8), c=range(8, 12), d=())
    first = assign("cooperative-sticky", subs, {T: 12})
    target = assign("sticky", subs, {T: 12})
    assert first["d"] == ()                       # everything is owned: d waits a round
    for m in "abc":
        assert set(first[m]) <= {tp for tp in subs[m].owned_partitions}   # only revocations
        assert len(first[m]) == 3 == len(target[m])
    # the owners revoked; the second round gives the revoked partitions to d
    second_subs = {m: Subscription((T,), None, first[m]) for m in "abcd"}
    second = assign("cooperative-sticky", second_subs, {T: 12})
    assert second == assign("sticky", second_subs, {T: 12})
    assert [len(second[m]) for m in "abcd"] == [3, 3, 3, 3]
    for m in "abc":
        assert second[m] == first[m]              # nobody loses anything in the second round
    assert set(second["d"]) == {(T, p) for p in range(12)} - {tp for m in "abc" for tp in first[m]}


def test_unowned_partitions_are_assigned_at_once_and_only_cooperative_sticky_is_cooperative():
    got = assign("cooperative-sticky", owned(a=(), b=()), {T: 4})
    assert sorted(len(v) for v in got.values()) == [2, 2]
    assert COOPERATIVE == {"cooperative-sticky"}


def test_current_owners_first_claimant_wins_and_vanished_partitions_are_dropped():
    subs = {"b": Subscription((T,), None, ((T, 0), (T, 1))),
            "a": Subscription((T,), None, ((T, 1), (T, 7)))}
    assert current_owners(subs, {T: 4}) == {(T, 0): "b", (T, 1): "a"}


members = st.lists(st.sampled_from("abcdefgh"), min_size=1, max_size=6, unique=True)


@settings(max_examples=150, deadline=None)
@given(ms=members, n=st.integers(0, 24), data=st.data())
def test_rounds_converge_never_double_assign_and_kept_partitions_never_pause(ms, n, data):
    counts = {T: n}
    # a stable group, then a change of membership: some leave, some join
    start = assign("sticky", {m: Subscription((T,)) for m in ms}, counts)
    stay = data.draw(st.lists(st.sampled_from(ms), unique=True, min_size=0))
    joining = data.draw(st.lists(st.sampled_from("ijkl"), unique=True, min_size=0))
    if not stay and not joining:
        return
    current = {m: start[m] for m in stay}
    current.update({m: () for m in joining})
    for _ in range(4):      # at most two rounds are needed; allow more to detect a loop
        subs = {m: Subscription((T,), None, tps) for m, tps in current.items()}
        got = assign("cooperative-sticky", subs, counts)
        # never two members for a partition, counting partitions owned but not yet revoked
        holders = Counter(tp for m in got for tp in set(got[m]) | set(current[m]))
        assert all(c == 1 for c in holders.values())
        for m in got:       # a member only gains unowned partitions or loses its own
            gained = set(got[m]) - set(current[m])
            assert all(tp not in current_owners(subs, counts) for tp in gained)
        revoked = any(set(current[m]) - set(got[m]) for m in got)
        current = got
        if not revoked:
            break
    else:
        raise AssertionError("cooperative rounds did not converge")
    # converged: a complete, balanced assignment
    all_tps = Counter(tp for tps in current.values() for tp in tps)
    assert set(all_tps) == {(T, p) for p in range(n)} and all(c == 1 for c in all_tps.values())
    sizes = [len(v) for v in current.values()]
    assert max(sizes) - min(sizes) <= 1
