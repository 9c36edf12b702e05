"""Judging while answers are still being generated: a judge call goes out as soon as its answer is in.

`JudgeStream` takes the items of a run one by one, in whatever order their answers arrive
(`submit(position, case)`; `case` None when there is nothing to judge), and keeps every judge of
the panel busy on the cases that have arrived: one worker thread per judge sends, each time, all
the cases that arrived while its previous calls were under way (one `ask_json` batch, so the
judge's own `concurrency` bounds it as before).

The calls are exactly those `JudgePanel.judge` makes on the finished list, so the verdicts are the
same: while a judge's structured-output method is unknown it is probed on the cases in their
order (the first case, then the next if that probe found nothing, at most `max_probe`), as
`ask_json` does on a whole list, and only then do the other cases go out, with the method found.
A judge whose endpoint is unusable abstains on all its remaining cases, with one warning.
"""
from __future__ import annotations

import threading
from typing import Any

from evekit.errors import EndpointError
from evekit.structured import JsonAnswer, remembered_method

__all__ = ["JudgeStream"]

_PENDING, _SKIP = object(), object()


class JudgeStream:
    """Every judge of `panel` on the cases of `total` positions, as they are submitted.

    Use: `submit` each position once (from any thread), `close()` when no more will come (positions
    never submitted count as nothing to judge), then `wait()` for {judge name: {position: answer}}.
    """

    def __init__(self, panel: Any, total: int, *, progress: bool = True, max_probe: int = 3) -> None:
        self.panel, self.total, self.max_probe = panel, int(total), int(max_probe)
        self._status: list[Any] = [_PENDING] * self.total  # per position: _PENDING, _SKIP or its chat
        self._ready: dict[str, list[int]] = {n: [] for n in panel.names}  # arrived, not yet taken
        self._answers: dict[str, dict[int, JsonAnswer]] = {n: {} for n in panel.names}
        self._closed = False
        self._errors: list[BaseException] = []
        self._cond = threading.Condition()
        from tqdm.auto import tqdm  # at use, not import: see ModelClient's bar

        # Every position counts until it turns out to have nothing to judge.
        self._bars = {s.name: tqdm(total=self.total, desc=f"{panel.kind.desc} {s.name}", unit="case",
                                   disable=not progress, dynamic_ncols=True) for s in panel.specs}
        self._threads = [threading.Thread(target=self._work, args=(s,), name=f"judge-{s.name}", daemon=True)
                         for s in panel.specs]
        for t in self._threads:
            t.start()

    # -- producer side ---------------------------------------------------------------------------
    def submit(self, position: int, case: Any | None) -> None:
        """The answer at `position` is in: `case` is what the judges get (None: nothing to judge)."""
        chat: Any = _SKIP
        if case is not None:
            try:
                chat = self.panel.kind.render(case, position)
            except Exception as exc:  # noqa: BLE001 - raised again by wait(), in the notebook's thread
                self._fail(exc)
                chat = _SKIP
        with self._cond:
            if self._status[position] is not _PENDING:
                return
            self._status[position] = chat
            for name, ready in self._ready.items():
                if chat is _SKIP:
                    self._bars[name].total -= 1
                else:
                    ready.append(position)
            self._cond.notify_all()

    def close(self) -> None:
        """No more submissions: a position still pending has nothing to judge."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def wait(self) -> dict[str, dict[int, JsonAnswer]]:
        """Every judge's answers once all are in: {judge name: {position: JsonAnswer}}."""
        self.close()
        for t in self._threads:
            t.join()
        for bar in self._bars.values():
            bar.close()
        if self._errors:
            raise self._errors[0]
        return self._answers

    def _fail(self, exc: BaseException) -> None:
        with self._cond:
            self._errors.append(exc)
            self._closed = True
            self._cond.notify_all()

    # -- one worker per judge ----------------------------------------------------------------------
    def _next(self, name: str, probing: bool, cursor: int) -> tuple[list[int], int] | None:
        """The positions to send next and the probe cursor; None when this judge is done.

        A batch is whole rounds of the judge's `concurrency` when that many have arrived: the batch
        ends when its slowest call does, so a last round with a few calls would leave slots idle
        that the next arrivals could use."""
        with self._cond:
            while True:
                if self._errors:
                    return None
                ready = self._ready[name]
                if probing:
                    # The first case in position order not yet judged: wait until it is known.
                    while cursor < self.total and (self._status[cursor] is _SKIP
                                                   or cursor in self._answers[name]):
                        cursor += 1
                    if cursor >= self.total:
                        return None
                    if self._status[cursor] is not _PENDING:
                        ready.remove(cursor)
                        return [cursor], cursor
                    if self._closed:  # never submitted: nothing to judge there
                        self._status[cursor] = _SKIP
                        self._bars[name].total -= 1
                        continue
                elif ready:
                    ready.sort()
                    rounds = self._round(name)
                    take = len(ready) if len(ready) < rounds else len(ready) // rounds * rounds
                    batch = ready[:take]
                    del ready[:take]
                    return batch, cursor
                elif self._closed:
                    return None
                self._cond.wait()

    def _round(self, name: str) -> int:
        concurrency = getattr(self.panel.clients[name], "concurrency", None)
        return concurrency if isinstance(concurrency, int) and concurrency > 0 else 1 << 30

    def _work(self, spec: Any) -> None:
        name, client = spec.name, self.panel.clients[spec.name]
        probes, cursor, unusable = 0, 0, None
        try:
            while True:
                known = remembered_method(client) is not None
                probing = not known and probes < self.max_probe and unusable is None
                step = self._next(name, probing, cursor)
                if step is None:
                    return
                batch, cursor = step
                chats = [self._status[i] for i in batch]
                if unusable is not None:
                    answers = [JsonAnswer(None, None, "", f"judge endpoint unusable: {unusable}")] * len(batch)
                else:
                    try:
                        answers = self.panel.ask_judge(spec, chats, max_probe=1 if probing else
                                                       (self.max_probe if known else 0))
                    except EndpointError as exc:  # this and every later case abstain, one warning
                        unusable = exc
                        answers = self.panel.unusable(spec, exc, len(batch))
                probes += probing
                with self._cond:
                    self._answers[name].update(zip(batch, answers))
                self._bars[name].update(len(batch))
        except BaseException as exc:  # noqa: BLE001 - a CacheMiss offline, a bug: wait() raises it
            self._fail(exc)
