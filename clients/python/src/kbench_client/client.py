"""HTTP client of `kbench serve` (standard library only): one evaluation, a batch sent
concurrently, or one awaited from asyncio."""

from __future__ import annotations

import asyncio
import json
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Iterable, Optional, Sequence, Tuple, Union


class ServiceError(Exception):
    """The service refused or failed a request: `status` is the HTTP status (429: its queue is
    full, retry later; 4xx: the request is wrong; 5xx: kbench failed), `message` its reason."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"{status}: {message}")
        self.status = status
        self.message = message


@dataclass(frozen=True)
class Result:
    """One evaluation, as the service's run record holds it (`raw["evaluation"]`)."""

    task: str
    file: str
    verdict: str
    #: How the gate treats the verdict: correct, failed, warned or skipped.
    verdict_class: str
    reason: str
    #: KernelBench's own verdict (allclose on its plain trials); None where it did not run.
    kernelbench_correct: Optional[bool]
    #: Reference time over the candidate's (ratio of medians); None when untimed.
    speedup: Optional[float]
    #: The speedup's 95 % interval.
    interval: Optional[Tuple[float, float]]
    #: FASTER, SLOWER, SAME or INCONCLUSIVE.
    label: Optional[str]
    checks: list = field(repr=False)
    timings: dict = field(repr=False)
    #: The run record (results.json) this result was appended to.
    record: str = field(repr=False)
    raw: dict = field(repr=False)

    @property
    def correct(self) -> bool:
        return self.verdict_class == "correct"

    @classmethod
    def from_reply(cls, reply: dict) -> Result:
        interval = reply.get("interval")
        return cls(
            task=reply["task"],
            file=reply["file"],
            verdict=reply["verdict"],
            verdict_class=reply["class"],
            reason=reply["reason"],
            kernelbench_correct=reply.get("kernelbench_correct"),
            speedup=reply.get("speedup"),
            interval=(interval[0], interval[1]) if interval else None,
            label=reply.get("label"),
            checks=reply.get("checks", []),
            timings=reply.get("timings", {}),
            record=reply.get("record", ""),
            raw=reply,
        )


class Client:
    """A `kbench serve` at `url` (as the service prints it), with its token if it has one.

    Settings a request may choose: trials (int), budget (seconds), mode ("offline",
    "kernelbench", "server") and contract ("kbench", "kernelbench"); the rest are the service's.
    """

    def __init__(self, url: str, token: Optional[str] = None, timeout: float = 3600.0) -> None:
        self.url = url.rstrip("/")
        self.token = token
        self.timeout = timeout

    def evaluate(self, task: str, source: str, **settings: Any) -> Result:
        """Evaluate `source` (a submission's Python text) for `task` ("1/19", "level1/19_ReLU"
        or a task file of the service's tree); blocks until the verdict is in."""
        body = {"task": task, "source": source, "settings": settings}
        return Result.from_reply(self._call("POST", "/v1/evaluate", body))

    def evaluate_many(
        self,
        items: Iterable[Tuple[str, str]],
        concurrency: int = 4,
        **settings: Any,
    ) -> list[Union[Result, ServiceError]]:
        """Evaluate (task, source) pairs, `concurrency` requests at a time: results in the
        order given, a refused request's `ServiceError` in its place."""

        def one(item: Tuple[str, str]) -> Union[Result, ServiceError]:
            try:
                return self.evaluate(item[0], item[1], **settings)
            except ServiceError as e:
                return e

        work: Sequence[Tuple[str, str]] = list(items)
        with ThreadPoolExecutor(max_workers=max(1, concurrency)) as pool:
            return list(pool.map(one, work))

    async def aevaluate(self, task: str, source: str, **settings: Any) -> Result:
        """`evaluate`, awaited: the request waits in a thread, not in the event loop."""
        return await asyncio.to_thread(self.evaluate, task, source, **settings)

    def health(self) -> dict:
        return self._call("GET", "/v1/health")

    def tasks(self) -> list[dict]:
        """The tasks the service evaluates: each with its id ("1/19") and name."""
        return self._call("GET", "/v1/tasks")["tasks"]

    def shutdown(self) -> None:
        """Ask the service to stop once the requests it admitted are answered."""
        self._call("POST", "/v1/shutdown", {})

    def _call(self, method: str, path: str, body: Optional[dict] = None) -> dict:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.url + path, data=data, method=method)
        request.add_header("Content-Type", "application/json")
        if self.token:
            request.add_header("Authorization", f"Bearer {self.token}")
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as reply:
                return json.loads(reply.read())
        except urllib.error.HTTPError as e:
            text = e.read().decode(errors="replace")
            try:
                message = json.loads(text)["error"]
            except (ValueError, KeyError, TypeError):
                message = text
            raise ServiceError(e.code, message) from None
