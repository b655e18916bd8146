"""The stopping rule: repeated confidence intervals with the error spent over the looks.

The statistic is the log ratio of two samples' geometric means. Each look spends part of
``alpha`` (power family, ``RHO = 3``) and reads Welch intervals against the margin; the first
decisive look is final, and whatever decides when to stop, a comparison's probability of a
wrong verdict is at most ``alpha``. docs/statistics.md has the method, sources and simulation.
"""

from __future__ import annotations

import bisect
import functools
import math
from dataclasses import dataclass, replace
from typing import Any, Iterable, Mapping, Sequence

from ..runsettings import AUTO_MAX as DEFAULT_MAX_REPS, AUTO_MIN as MIN_REPS  # noqa: F401 (the matrix's bounds)
from .estimate import Estimate, estimate


ALPHA = 0.05
DEFAULT_THRESHOLD_PCT = 5.0
#: the largest repetition count a side the "needs about N" estimate looks for
NEEDED_LIMIT = 1000
#: the power of the alpha-spending function ``alpha * t ** RHO`` (Kim and DeMets 1987)
RHO = 3.0
#: a gain within this (log scale, about 1 %) of a threshold "sits on it"
ON_THRESHOLD = math.log(1.01)

GAIN, LOSS, NO_DIFFERENCE, INCONCLUSIVE = "gain", "loss", "no difference", "inconclusive"
VERDICTS = (GAIN, LOSS, NO_DIFFERENCE, INCONCLUSIVE)
#: a technique whose mechanism never engaged (harness.verdicts.techniques): not a verdict of
#: the rule, which the comparison's own says nothing about
NOT_EXERCISED = "not exercised"

#: (repetition number, value) of the repetitions that count (harness.verdicts.pairs.kept)
Sample = Sequence[tuple[int, float]]


@dataclass(frozen=True)
class Rule:
    """How a run's comparisons are judged: the threshold (also the equivalence margin), the
    looks (``max_reps`` None: a fixed number of repetitions, one look at the end) and the error
    ``alpha`` each comparison spends over its looks."""

    threshold_pct: float = DEFAULT_THRESHOLD_PCT
    min_reps: int = MIN_REPS
    max_reps: int | None = None
    alpha: float = ALPHA
    #: the spending function's power; None spends ``alpha / K`` at every look (Bonferroni; with
    #: ``alpha = K x 5 %``, the 95 %-at-every-look peeking the simulations compare with)
    rho: float | None = RHO

    @property
    def sequential(self) -> bool:
        return self.max_reps is not None

    @property
    def looks(self) -> int:
        """K, the most looks a comparison can have."""
        return 1 if self.max_reps is None else self.max_reps - self.min_reps + 1

    def alpha_at(self, rnd: int) -> float:
        """The error the look after round ``rnd`` spends: ``alpha`` for a fixed run's one look;
        for a sequential rule ``alpha * ((r / max) ** RHO - ((r - 1) / max) ** RHO)``, the first
        look (round ``min_reps``) taking everything up to it (``rho`` None: ``alpha / K`` each).
        Rounds outside ``min..max`` spend nothing (no look)."""
        if self.max_reps is None:
            return self.alpha
        if not self.min_reps <= rnd <= self.max_reps:
            return 0.0
        if self.rho is None:
            return self.alpha / self.looks
        before = 0.0 if rnd == self.min_reps else ((rnd - 1) / self.max_reps) ** self.rho
        return self.alpha * ((rnd / self.max_reps) ** self.rho - before)

    def confidence_at(self, rnd: int, equivalence: bool = False) -> float:
        """The level of the look after round ``rnd``: ``1 - alpha_r`` for a gain or a loss,
        ``1 - 2 alpha_r`` for no difference (``equivalence``). A sequential rule's rounds past
        its last look get the last look's level (what "about N repetitions would decide" uses)."""
        if self.max_reps is not None:
            rnd = max(self.min_reps, min(rnd, self.max_reps))
        return 1.0 - (2.0 if equivalence else 1.0) * self.alpha_at(rnd)

    def with_threshold(self, threshold_pct: float | None) -> "Rule":
        return self if threshold_pct is None else replace(self, threshold_pct=float(threshold_pct))

    @classmethod
    def of_run(cls, run: Mapping[str, Any] | None, threshold_pct: float | None = None) -> "Rule":
        """The rule of a run from its settings (``matrix.run`` of run.json, or
        ``dataclasses.asdict(RunSettings)``): ``repetitions: auto`` looks after every round from
        ``min_repetitions`` to ``max_repetitions``; a number of repetitions looks once.
        ``threshold_pct`` (a command-line override) replaces the run's ``threshold_pct``."""
        run = run if isinstance(run, Mapping) else {}
        thr = threshold_pct if threshold_pct is not None else run.get("threshold_pct")
        rule = cls(threshold_pct=float(thr) if isinstance(thr, (int, float)) else DEFAULT_THRESHOLD_PCT)
        if run.get("repetitions") == "auto":
            lo = run.get("min_repetitions") or MIN_REPS
            hi = run.get("max_repetitions") or DEFAULT_MAX_REPS
            rule = replace(rule, min_reps=max(MIN_REPS, int(lo)), max_reps=max(int(hi), max(MIN_REPS, int(lo))))
        return rule


@dataclass(frozen=True)
class Outcome:
    """A comparison's answer: the gain (percent) and interval of its deciding look (the last
    look when undecided), the verdict, the repetitions it rests on and, when inconclusive, why."""

    verdict: str
    gain_pct: float | None
    ci_low_pct: float | None
    ci_high_pct: float | None
    n_treatment: int
    n_baseline: int
    confidence: float | None = None     # the look's level
    look: int | None = None             # the round (repetition number) of that look
    reason: str = ""                    # why inconclusive ("" when decided)
    needed: int | None = None           # repetitions a side that would likely decide, at this spread
    paired: bool = False                # judged window by window (both sides in the same windows)

    @property
    def decided(self) -> bool:
        """gain, loss or no difference."""
        return self.verdict in (GAIN, LOSS, NO_DIFFERENCE)

    @property
    def settled(self) -> bool:
        """Decided, or not exercised: more repetitions at the same settings would not change
        it (the auto rounds add none for it)."""
        return self.decided or self.verdict == NOT_EXERCISED


def decide(ci_low_pct: float | None, ci_high_pct: float | None, threshold_pct: float) -> str:
    """``gain`` when the whole interval is above +threshold, ``loss`` when wholly below
    -threshold, ``no difference`` when it lies within +-threshold, else ``inconclusive``."""
    if ci_low_pct is None or ci_high_pct is None:
        return INCONCLUSIVE
    if ci_low_pct > threshold_pct:
        return GAIN
    if ci_high_pct < -threshold_pct:
        return LOSS
    if ci_low_pct >= -threshold_pct and ci_high_pct <= threshold_pct:
        return NO_DIFFERENCE
    return INCONCLUSIVE


def _pct(x: float) -> float:
    return 100.0 * math.expm1(x)


def _gap(d: float, threshold_pct: float) -> tuple[float, bool]:
    """How narrow (half-width, log scale) an interval centred on ``d`` must be to decide, and
    whether that decision is no difference (``d`` within the margins: the equivalence level)."""
    up, down = math.log1p(threshold_pct / 100.0), math.log1p(-min(threshold_pct, 99.999) / 100.0)
    if d > up:
        return d - up, False
    if d < down:
        return down - d, False
    return min(d - down, up - d), True


def needed_reps(e: Estimate, rule: Rule, start: int) -> int | None:
    """The smallest equal number of repetitions a side (from ``start``) whose interval at the
    level of the look with that many repetitions (the last look's beyond it), at these
    variances and this estimate, would decide; None beyond :data:`NEEDED_LIMIT` or when the
    estimate sits on a threshold."""
    gap, equivalence = _gap(e.d, rule.threshold_pct)
    if gap <= 0.0:
        return None

    def decides(n: int) -> bool:
        at_n = Estimate(d=e.d, var_t=e.var_t, n_t=n, var_b=e.var_b, n_b=n, paired=e.paired,
                        prior_df=e.prior_df)    # not replace(): 4x the cost
        return at_n.half_width(rule.confidence_at(n, equivalence)) < gap

    grid = _needed_grid(max(start, 2))
    # Up to the rule's last look each count has its own level, which need not fall as the
    # count grows: those are tried in turn. Past it the level is the last look's, so the
    # half-width only shrinks as the count grows: the first count that decides is found by
    # bisection (the same count as trying each in turn, in a few calls instead of dozens).
    last = rule.max_reps if rule.max_reps is not None else 0
    i = 0
    while i < len(grid) and grid[i] <= last:
        if decides(grid[i]):
            return grid[i]
        i += 1
    i = bisect.bisect_left(grid, True, lo=i, key=decides)
    return grid[i] if i < len(grid) else None


@functools.cache
def _needed_grid(start: int) -> tuple[int, ...]:
    """The counts :func:`needed_reps` considers from ``start``: each up to 50, then 10 % apart,
    up to :data:`NEEDED_LIMIT`."""
    out = []
    n = start
    while n <= NEEDED_LIMIT:
        out.append(n)
        n = n + 1 if n < 50 else int(n * 1.1)
    return tuple(out)


def _valid(sample: Iterable[tuple[int, float | None]]) -> list[tuple[int, float]]:
    return sorted((int(r), float(v)) for r, v in sample
                  if v is not None and math.isfinite(float(v)) and float(v) > 0.0)


def _spread(e: Estimate) -> str:
    if e.paired:
        return f"s.d. {_pct(math.sqrt(e.var_t)):.1f} % of a window's ratio"
    return f"s.d. {_pct(math.sqrt(e.var_t)):.1f} % and {_pct(math.sqrt(e.var_b)):.1f} % per repetition"


def _read(e: Estimate, rule: Rule, rnd: int, explain: bool = True) -> Outcome:
    """A look's verdict: a gain or a loss read from the ``1 - alpha_r`` interval, else no
    difference from the ``1 - 2 alpha_r`` one; an undecided look reports the wider (and, when
    ``explain``, says why: the spread, and how many more windows or repetitions would decide)."""
    d, nt, nb = e.d, e.n_t, e.n_b
    conf = rule.confidence_at(rnd)
    lo, hi = (_pct(x) for x in e.interval(conf))
    verdict = decide(lo, hi, rule.threshold_pct)
    out = Outcome(verdict, _pct(d), lo, hi, nt, nb, conf, rnd)
    if verdict in (GAIN, LOSS):
        return out
    eq_conf = rule.confidence_at(rnd, equivalence=True)
    lo_eq, hi_eq = (_pct(x) for x in e.interval(eq_conf))
    if decide(lo_eq, hi_eq, rule.threshold_pct) == NO_DIFFERENCE:
        return Outcome(NO_DIFFERENCE, _pct(d), lo_eq, hi_eq, nt, nb, eq_conf, rnd)
    if not explain:
        return out
    # out is inconclusive here: had the wider interval lain within the margins, so would this one
    need = needed_reps(e, rule, max(nt, nb) + 1)
    sd, unit = _spread(e), "windows" if e.paired else "repetitions a side"
    if need is None and _gap(d, rule.threshold_pct)[0] < ON_THRESHOLD:
        why = (f"the gain {_pct(d):+.1f} % sits on the +-{rule.threshold_pct:g} % threshold ({sd}): "
               "more repetitions would help little")
    elif need is None:
        why = (f"the interval [{lo:+.1f}, {hi:+.1f}] % straddles a threshold; at this spread ({sd}) more "
               f"than {NEEDED_LIMIT} {unit} would be needed")
    else:
        why = (f"the interval [{lo:+.1f}, {hi:+.1f}] % straddles a threshold; at this spread ({sd}) "
               f"about {need} {unit} would decide")
    return replace(out, reason=why, needed=need)


def judge(treatment: Iterable[tuple[int, float | None]], baseline: Iterable[tuple[int, float | None]],
          rule: Rule, higher_is_better: bool = True, paired: bool = False, explain: bool = True) -> Outcome:
    """The verdict of one comparison under ``rule``: the looks replayed in round order (a
    fixed run: one look with every repetition); the first decisive look is the answer, else the
    last look, inconclusive with its reason. Values that are None, not finite or not positive
    are left out (a rate of 0 has no ratio). ``paired``: the two sides were measured in the
    same windows, repetition ``r`` of each in window ``r`` (an alternated run): each look judges
    the log ratios of the windows both sides count, and a window one side lost counts for
    neither. ``explain`` False: an inconclusive verdict without its reason and ``needed`` (most
    of a look's cost; a simulation reads the verdict only)."""
    out = _judge(treatment, baseline, rule, higher_is_better, paired, explain)
    return replace(out, paired=True) if paired else out


def _judge(treatment: Iterable[tuple[int, float | None]], baseline: Iterable[tuple[int, float | None]],
           rule: Rule, higher_is_better: bool, paired: bool, explain: bool = True) -> Outcome:
    t, b = _valid(treatment), _valid(baseline)
    if rule.max_reps is not None:    # a sequential rule never looks past its last look
        t, b = [x for x in t if x[0] <= rule.max_reps], [x for x in b if x[0] <= rule.max_reps]
    if paired:
        both = dict(b)
        t = [(r, v) for r, v in dict(t).items() if r in both]
        b = [(r, both[r]) for r, _ in t]
    rounds = sorted({r for r, _ in t} | {r for r, _ in b})
    if not rule.sequential:
        rounds = rounds[-1:]
    last: Outcome | None = None
    seen: tuple[int, int] | None = None
    for rnd in rounds:
        tt = [v for r, v in t if r <= rnd]
        bb = [v for r, v in b if r <= rnd]
        if len(tt) < rule.min_reps or len(bb) < rule.min_reps or (len(tt), len(bb)) == seen:
            continue
        seen = (len(tt), len(bb))
        # paired: tt[i] and bb[i] were measured in one window, judged on their log ratios
        last = _read(estimate(tt, bb, higher_is_better, paired), rule, rnd, explain)
        if last.decided:
            return last
    if last is not None:
        return last
    gain = _pct(estimate([v for _, v in t], [v for _, v in b], higher_is_better).d) if t and b else None
    what = "windows both sides count" if paired else "repetitions on a side"
    return Outcome(INCONCLUSIVE, gain, None, None, len(t), len(b),
                   reason=f"fewer than {rule.min_reps} {what} ({len(t)} and {len(b)} counted)")
