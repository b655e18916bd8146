"""Run a matrix: every permutation and repetition not yet complete, with progress and resume.

The repetition itself (prepare, broker side, dialogs, warm-up, collectors, swarm, drain,
verify, summarize, write) is :class:`harness.repetition.Repetition`; this module is the loop
around it: the run directory and run.json, the order, progress lines and resume.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import asdict
from pathlib import Path

from .cpuawake import CpusAwake
from .errors import UserError
from .matrix import Matrix, Permutation
from .plan import PlannedWindow, group_windows
from .progress import Progress
from .redact import error_line
from .backlog import BacklogRepetition
from .repetition import Interrupted, Repetition, Repetitions
from .results import (RepetitionSummary, RunDir, disturbance, host_cpu_speed, host_cross_cpu, latest_unfinished,
                      utc_now_iso, write_atomic)
from .targets.base import Target
from .verdicts import Rule, permutation_rows
from .verdicts.answer import comparison_words, host_note, key_row, stop_words, threads_text
from .verdicts.auto import STOP_DECIDED, STOP_NONE, RoundPlan, fit_round, plan_round

log = logging.getLogger(__name__)

class Runner(Repetitions):
    def __init__(self, matrix: Matrix, target: Target, run_dir: RunDir, *, progress: Progress | None = None,
                 stop_event: threading.Event | None = None, remote=None, metrics=None):
        super().__init__(matrix, target, run_dir, stop_event=stop_event, remote=remote, metrics=metrics)
        self.progress = progress or Progress(total=len(matrix) * matrix.run.planned_repetitions, force_plain=True)
        self.lost_total = 0
        self.duplicated_total = 0

    # ------------------------------------------------------------------ whole run
    def run(self) -> int:
        """Run every repetition not yet complete, in the matrix's order (``run.order``).
        Returns the count of messages lost across the run (0 is the only good answer)."""
        try:
            if not self.matrix.run.keep_cpus_awake:
                return self._run()
            with CpusAwake() as awake:
                self.run_dir.update_run(cpu_awake=awake.record())
                return self._run()
        finally:
            self.close()

    def _run(self) -> int:
        m = self.matrix
        if m.run.auto:
            return self.run_auto()
        todo = self._todo(m.schedule())
        if self.progress.skipped:
            self.progress.line(f"resuming: {self.progress.skipped} repetition(s) already complete, "
                               f"{len(todo)} to run")
        self._execute(todo)
        return self.lost_total

    def _todo(self, pairs) -> list[tuple[Permutation, int]]:
        """The (permutation, repetition) pairs not complete (a damaged one set aside: to run
        again); the others counted as skipped."""
        todo = []
        for perm, rep in pairs:
            if self.run_dir.is_complete(perm.id, rep) and not self._damaged(perm, rep):
                self.progress.skip()
            else:
                todo.append((perm, rep))
        return todo

    def _execute(self, todo: list[tuple[Permutation, int]], record=lambda window, seconds: {},
                 closes: bool = True) -> None:
        """Run ``todo``'s windows (:func:`harness.plan.group_windows`) in order; after each,
        run.json gets the progress and what ``record(window, seconds)`` returns. ``closes``:
        ``todo`` ends the run, so its last window's swarm is the run's last."""
        self.progress.mark_start()
        windows = list(group_windows(todo, self.matrix.permutations(), self.matrix.run.alternate))
        for k, w in enumerate(windows):
            if self.stop_event.is_set():
                raise Interrupted()
            t0 = time.monotonic()
            summaries = self.run_window(w, last=closes and k == len(windows) - 1)
            extra = record(w, time.monotonic() - t0)
            for q, summary in zip(w.members, summaries):
                self.progress.advance()
                self.run_dir.update_run(permutations_done=self.progress.done, **extra)
                self._report(q, w.rep, summary)

    def _damaged(self, perm: Permutation, rep: int) -> bool:
        """A committed repetition whose summary does not read back is set aside and run again."""
        problem = self.run_dir.damage(perm.id, rep)
        if problem is None:
            return False
        aside = self.run_dir.set_aside(perm.id, rep)
        self.progress.line(f"warning: {problem}: this repetition is damaged; set aside as {aside.name} "
                           "and run again")
        return True

    # ------------------------------------------------------------------ repetitions: auto
    def run_auto(self) -> int:
        """``run.repetitions: auto`` (harness.verdicts.auto): interleaved rounds, the first
        ``min_repetitions`` of every permutation, then of the permutations of undecided
        comparisons only, until every comparison is decided, ``max_repetitions`` or the time
        budget; a round that does not fit whole runs the undecided comparisons that do
        (:func:`harness.verdicts.auto.fit_round`). What ran before an interruption is kept
        (and its time counted); each round's permutations are recorded when it begins, so a
        resumed run finishes that round as it began and continues where it was."""
        m, rd = self.matrix, self.run_dir
        perms = {p.id: p for p in m.permutations()}
        rule = Rule.of_run(asdict(m.run))
        budget = m.run.budget_minutes * 60.0 if m.run.budget_minutes else None
        clock = dict(rd.record().auto or {})
        spent, timed = float(clock.get("spent_seconds") or 0.0), int(clock.get("timed_repetitions") or 0)
        # the repetitions' windows so far (None: a run begun before they were counted)
        windows = float(clock.get("window_seconds") or 0.0) if "window_seconds" in clock or not timed else None
        begun = dict(clock.get("round_plan") or {})
        plan: RoundPlan | None = None
        for rnd in range(1, (rule.max_reps or rule.min_reps) + 2):
            plan = plan_round(rnd, list(perms), permutation_rows(s.row() for s in rd.readable_summaries()), rule)
            if plan.stop:
                break
            if rnd > rule.min_reps:
                if begun.get("round") == rnd:        # begun before an interruption: finished as begun
                    plan.perm_ids = [p for p in plan.perm_ids if p in set(begun.get("perm_ids") or ())]
                    plan.left_out = [j for j in plan.undecided if not set(j.pairing.perm_ids) <= set(plan.perm_ids)]
                else:
                    todo = [p for p in plan.perm_ids if not rd.is_complete(p, rnd)]
                    plan = fit_round(plan, spent, self._costs(perms, todo, spent, timed, windows), budget)
                    if plan.stop:
                        break
                    begun = {"round": rnd, "perm_ids": plan.perm_ids, "left_out": [
                        {"perm_id": j.pairing.perm_ids[0], "baseline_perm_id": j.pairing.perm_ids[1]}
                        for j in plan.left_out]}
                    rd.update_run(auto=self._clock(rnd - 1, spent, timed, windows, budget, begun))
                self.progress.add_total(len(plan.perm_ids))
                left = f", {len(plan.left_out)} left out (time budget)" if plan.left_out else ""
                self.progress.line(f"round {rnd}: {len(plan.undecided)} comparison(s) undecided, "
                                   f"{len(plan.perm_ids)} permutation(s){left}")

            def record(w: PlannedWindow, seconds: float) -> dict:
                nonlocal spent, timed, windows
                spent, timed = spent + seconds, timed + len(w.members)
                if windows is not None:    # one warm-up, each member's measured time
                    windows += self._window(w.members[0]) + sum(self.matrix.run_for(q).measure_seconds
                                                                for q in w.members[1:])
                return {"permutations_total": self.progress.total,
                        "auto": self._clock(rnd, spent, timed, windows, budget, begun)}

            self._execute(self._todo((perms[pid], rnd) for pid in plan.perm_ids), record, closes=False)
        assert plan is not None
        self._conclude(plan, self._clock(plan.number - 1, spent, timed, windows, budget, begun))
        return self.lost_total

    def _window(self, perm: Permutation) -> float:
        settings = self.matrix.run_for(perm)
        return settings.warmup_seconds + settings.measure_seconds

    def _costs(self, perms: dict[str, Permutation], todo: list[str], spent: float, timed: int,
               windows: float | None) -> dict[str, float] | None:
        """What each permutation of ``todo`` is expected to take: its warm-up and window and
        the mean time a repetition has taken beyond its own so far (swarm start and end,
        drain, preparation); a run begun before windows were counted: the mean repetition
        time. None before any repetition was timed."""
        if not timed:
            return None
        if windows is None:
            return {pid: spent / timed for pid in todo}
        beyond = max(0.0, spent - windows) / timed
        return {pid: self._window(perms[pid]) + beyond for pid in todo}

    @staticmethod
    def _clock(rnd: int, spent: float, timed: int, windows: float | None, budget: float | None,
               begun: dict) -> dict:
        """run.json's ``auto`` record while the rounds run (what a resumed run reads back)."""
        out = {"rounds": rnd, "spent_seconds": round(spent, 3), "timed_repetitions": timed, "budget_seconds": budget}
        if windows is not None:
            out["window_seconds"] = round(windows, 3)
        if begun:
            out["round_plan"] = begun
        return out

    def _conclude(self, plan: RoundPlan, clock: dict) -> None:
        """run.json's ``auto`` record (``clock`` completed) and the lines saying which
        comparisons stayed inconclusive and why, and which techniques were not exercised
        (settled: no round was added for them) and how to exercise them."""
        idle, spent = plan.not_exercised, clock["spent_seconds"]
        record = {**clock, "stopped": plan.stop, "comparisons": len(plan.judged),
                  "decided": len(plan.judged) - len(plan.undecided) - len(idle), "not_exercised": len(idle)}
        summaries = list(self.run_dir.readable_summaries())
        for key, host in (("host_cpu_speed", host_cpu_speed(summaries)), ("host_cross_cpu", host_cross_cpu(summaries))):
            if host is not None:
                record[key] = host
        rows = [key_row(j, record) for j in plan.undecided]
        record["undecided"] = [{k: r[k] for k in ("comparison", "baseline", "total_threads", "perm_id",
                                                   "baseline_perm_id", "gain_pct", "ci_low_pct", "ci_high_pct",
                                                   "n", "baseline_n", "reason")} for r in rows]
        self.run_dir.update_run(auto=record)
        why = {STOP_DECIDED: "every comparison decided", STOP_NONE: "the matrix has no comparison"}.get(
            plan.stop or "", stop_words(record))
        if plan.stop == STOP_DECIDED and idle:
            why = "every comparison decided or not exercised"
        self.progress.line(f"auto repetitions: {record['decided']} of {record['comparisons']} comparison(s) decided "
                           + (f"({len(idle)} not exercised) " if idle else "")
                           + f"after {record['rounds']} round(s), {spent / 60:.1f} min of repetitions: {why}")
        for r in rows:
            self.progress.line(f"  inconclusive: {comparison_words(r)} at {threads_text(r['total_threads'])}: "
                               f"{r['gain_text']} at {r['reps_text']} repetitions: {r['reason']}")
        for r in (key_row(j, record) for j in idle):
            self.progress.line(f"  not exercised: {comparison_words(r)} at {threads_text(r['total_threads'])}: "
                               f"{r['reason']}")
        note = host_note(record) if rows else None
        if note:
            self.progress.line(f"  {note}")

    def _report(self, perm: Permutation, rep: int, summary: RepetitionSummary) -> None:
        r = summary.row()
        nan = float("nan")
        lost, status = r["messages_lost"], r["status"]
        flag = ""
        shortfall = f"behind: {r['achieved_rate'] or 0:,.0f} of {r['offered_rate'] or 0:,.0f} SENDs/s offered"
        why = disturbance(r)
        if lost or r["messages_duplicated"] or r["messages_phantom"]:
            flag = "  !!! " + ", ".join(f"{n} MESSAGES {what}" for n, what in
                                        ((lost, "LOST"), (r["messages_duplicated"], "DUPLICATED"),
                                         (r["messages_phantom"], "NEVER SENT")) if n) + " !!!"
        elif status == "undelivered":
            why_stopped = ("the target queue was disabled (five rollbacks in a row)" if r["queue_disabled"]
                           else "the drain timed out")
            flag = (f"  !!! {r['messages_undelivered']} messages still queued when {why_stopped} "
                    "(undelivered, not lost) !!!")
        elif status == "users_idle":
            flag = (f"  !!! only {r['users_active']} of {r['users_expected']} users were sending "
                    "through the window !!!")
        elif status == "behind":
            flag = f"  [{shortfall}, corrected SEND p99 {r['send_corrected_p99_ms'] or nan:.1f} ms]"
        elif why:
            flag = f"  [{why}" + (f"; {shortfall}" if r["behind"] else "") + "]"
        elif status != "ok":
            flag = f"  [{status}]"
        if r["backlog_messages"] is not None:
            flag += (f"  backlog {r['backlog_messages']:,} drained in {r['drain_seconds'] or nan:.2f} s "
                     f"({r['drain_rate'] or 0:,.0f} msg/s)")
        p99 = r["send_p99_ms"]
        self.progress.line(f"{perm.id} rep {rep}: send {r['send_rate']:.0f} msg/s, receive "
                           f"{r['receive_rate']:.0f} msg/s, SEND p99 {p99 if p99 is not None else nan:.2f} ms, "
                           f"lost {lost}, ETA {self.progress.eta()}{flag}")

    # ------------------------------------------------------------------ one repetition
    def run_window(self, window: PlannedWindow, last: bool = False) -> list[RepetitionSummary]:
        """One window: its members' summaries, in order (an alternated window's accounting is
        the window's, the same in each member's summary). ``last``: its swarm is the run's last,
        so the swarm series closes once the drain is over."""
        perm, rep = window.members[0], window.rep
        phase = {"now": "preparing"}

        def status(text: str) -> None:
            phase["now"] = text.split(":")[0].split(" ")[0]
            self.progress.status(f"{perm.id} rep {rep}: {text}", phase_change=True)

        def live(samples) -> None:
            rate = next((s.value for s in samples if s.metric == "received_per_s"), None)
            xq = next((s.value for s in samples if s.metric == "xmitq_total"), None)
            if rate is not None and phase["now"] in ("running", "draining"):
                what = "draining" if phase["now"] == "draining" else "running"
                self.progress.status(f"{perm.id} rep {rep}: {what}: {rate:,.0f} msg/s received, "
                                     f"xmitq {xq or 0:,.0f}")

        # run.backlog_messages: the backlog drain (harness.backlog); else the load repetition
        cls = BacklogRepetition if self.matrix.run.backlog_messages else Repetition
        summaries = self.repetition(perm, rep, cls, on_status=status, on_tick=live,
                                    last_swarm=last and cls is not BacklogRepetition, members=list(window.members),
                                    slice_seconds=self.matrix.run.slice_seconds).run()
        self.lost_total += summaries[0].messages_lost
        # exactly-once broken: a message processed twice, or one processed that was never sent
        self.duplicated_total += (summaries[0].messages_duplicated or 0) + (summaries[0].messages_phantom or 0)
        return summaries


def start_run(matrix: Matrix, target: Target, results_root: Path, out: Path | None, resume: bool) -> RunDir:
    """Provision the target, then create (or find, for --resume) the run directory and write
    its run.json (after provisioning, so it describes the databases the run uses)."""
    if resume:
        rd = RunDir(out) if out else latest_unfinished(results_root, matrix.name)
        if rd is None or not rd.run_json.exists():
            raise UserError(f"nothing to resume: no unfinished run of matrix {matrix.name!r} under {results_root}"
                            if not out else "no run.json to resume", file=str(out) if out else None)
        rd.hold()   # before anything is written: another run writing it is named, exit 2
        try:
            _resume_record(rd, matrix, target)
        except BaseException:
            rd.release()
            raise
        return rd
    target.provision(max(matrix.axes["initiators"]))
    rd = RunDir.create(results_root, matrix.name, out).hold()   # claimed, and held by this process
    try:
        write_atomic(rd.path / "matrix.yaml", matrix.path.read_bytes())
        rd.begin_record(matrix.to_dict(), target.describe(), total=len(matrix) * matrix.run.planned_repetitions)
    except BaseException:
        rd.release()
        raise
    return rd


def _resume_record(rd: RunDir, matrix: Matrix, target: Target) -> None:
    """Check that the run being resumed is this matrix's, provision, and mark its record running."""
    if rd.record().matrix.get("sha256") != matrix.sha256:
        raise UserError("the matrix file changed since this run started; resume needs the same matrix",
                        file=str(matrix.path))
    try:
        target.provision(max(matrix.axes["initiators"]))
    except BaseException as e:
        # the run exists and stays resumable; its record says how this attempt ended
        # (messages_lost is left as the earlier attempts counted it)
        stopped = isinstance(e, (KeyboardInterrupt, Interrupted))
        rd.update_run(status="interrupted" if stopped else "failed", ended=utc_now_iso(),
                      error=None if stopped else error_line(e))
        raise
    rd.update_run(status="running", resumed=utc_now_iso(), error=None)
