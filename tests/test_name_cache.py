"""fetch.dns.name_cache: the pure bookkeeping of a crawl's host-name lookups,
checked directly and against a model with a hypothesis state machine."""

from __future__ import annotations

from collections import OrderedDict

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from trio_crawl.fetch.dns.name_cache import Hit, NameCache, Step


def cache(max_names: int = 100) -> NameCache[str]:
    return NameCache(ttl=60, negative_ttl=5, max_names=max_names)


def test_one_lookup_per_name_and_case_does_not_matter() -> None:
    names = cache()
    assert names.begin("A.test", now=0) is Step.RESOLVE
    assert names.begin("a.TEST", now=0) is Step.WAIT
    assert names.begin("b.test", now=0) is Step.RESOLVE
    names.finish("a.test", "10.0.0.1", now=1, failed=False)
    assert names.begin("a.test", now=2) == Hit("10.0.0.1")
    stats = names.statistics()
    assert (stats.lookups, stats.waits, stats.hits, stats.pending, stats.names) == (2, 1, 1, 1, 1)


def test_answers_expire_after_ttl_failures_after_negative_ttl() -> None:
    names = cache()
    for name in ("ok.test", "gone.test"):
        assert names.begin(name, now=0) is Step.RESOLVE
    names.finish("ok.test", "10.0.0.1", now=0, failed=False)
    names.finish("gone.test", "NXDOMAIN", now=0, failed=True)
    assert names.begin("gone.test", now=4.9) == Hit("NXDOMAIN")
    assert names.begin("gone.test", now=5) is Step.RESOLVE
    assert names.begin("ok.test", now=59.9) == Hit("10.0.0.1")
    assert names.begin("ok.test", now=60) is Step.RESOLVE


def test_an_abandoned_lookup_is_taken_over_by_the_next_caller() -> None:
    names = cache()
    assert names.begin("a.test", now=0) is Step.RESOLVE
    names.abandon("a.test")
    assert names.begin("a.test", now=0) is Step.RESOLVE
    assert len(names) == 0


def test_the_least_recently_used_answer_is_forgotten_first() -> None:
    names = cache(max_names=2)
    for name in ("a", "b"):
        names.begin(name, now=0)
        names.finish(name, name.upper(), now=0, failed=False)
    assert names.begin("a", now=1) == Hit("A")  # b is now the least recently used
    names.begin("c", now=1)
    names.finish("c", "C", now=1, failed=False)
    assert names.begin("a", now=2) == Hit("A")
    assert names.begin("b", now=2) is Step.RESOLVE
    assert (len(names), names.statistics().evicted) == (2, 1)


def test_misuse_is_loud() -> None:
    names = cache()
    with pytest.raises(ValueError, match=r"^no lookup of 'a\.test' is in flight$"):
        names.finish("a.test", "x", now=0, failed=False)
    with pytest.raises(ValueError, match=r"^no lookup of 'b' is in flight$"):
        names.abandon("b")
    with pytest.raises(ValueError):
        NameCache(ttl=0, negative_ttl=1, max_names=1)


NAMES = st.sampled_from(["a.test", "A.TEST", "b.test", "c.test", "d.test"])


class NameCacheMachine(RuleBasedStateMachine):
    """Against a model (a recency-ordered dict): one lookup per name in
    flight, each answer served exactly until it expires or is the least
    recently used of more than ``max_names``, never more than that kept."""

    MAX = 3

    def __init__(self) -> None:
        super().__init__()
        self.cache: NameCache[str] = NameCache(ttl=10, negative_ttl=2, max_names=self.MAX)
        self.now = 0.0
        self.pending: set[str] = set()
        self.answers: OrderedDict[str, tuple[str, float]] = OrderedDict()  # oldest use first
        self.serial = 0

    @rule(dt=st.floats(0, 4))
    def time_passes(self, dt: float) -> None:
        self.now += dt

    @rule(name=NAMES)
    def begin(self, name: str) -> None:
        key = name.lower()
        step = self.cache.begin(name, self.now)
        if key in self.pending:
            assert step is Step.WAIT
        elif key in self.answers and self.now < self.answers[key][1]:
            assert step == Hit(self.answers[key][0])
            self.answers.move_to_end(key)
        else:
            assert step is Step.RESOLVE
            self.pending.add(key)
            self.answers.pop(key, None)

    @precondition(lambda self: self.pending)
    @rule(data=st.data(), failed=st.booleans())
    def finish(self, data: st.DataObject, failed: bool) -> None:
        key = data.draw(st.sampled_from(sorted(self.pending)))
        self.serial += 1
        value = f"{key}#{self.serial}"
        self.cache.finish(key.upper(), value, self.now, failed=failed)
        self.pending.remove(key)
        self.answers[key] = (value, self.now + (2 if failed else 10))
        while len(self.answers) > self.MAX:
            self.answers.popitem(last=False)

    @precondition(lambda self: self.pending)
    @rule(data=st.data())
    def abandon(self, data: st.DataObject) -> None:
        key = data.draw(st.sampled_from(sorted(self.pending)))
        self.cache.abandon(key)
        self.pending.remove(key)

    @invariant()
    def bounded_and_consistent(self) -> None:
        stats = self.cache.statistics()
        assert stats.names == len(self.answers) <= self.MAX
        assert stats.pending == len(self.pending)


NameCacheMachine.TestCase.settings = settings(
    max_examples=200, stateful_step_count=40, deadline=None
)
test_name_cache_machine = NameCacheMachine.TestCase
