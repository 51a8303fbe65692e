"""HTTP client of `kbench serve` (standard library only): one evaluation, a batch sent
concurrently, or one awaited from asyncio, against one service or several instances of one run.

With several endpoints each request goes to the ready instance with the least load (its queue
from `/v1/health`, and the requests this client has in flight there), and is sent again, with the
same id, when an instance's queue is full (429), when it drains or is gone (503, a refused
connection), or when the connection is lost mid-request. The id makes the retry safe: an instance
that judged the request (or whose sibling did) answers from its result, one still judging it
makes the retry wait, so no request is judged twice."""

from __future__ import annotations

import asyncio
import glob
import http.client
import json
import os
import random
import threading
import time
import urllib.error
import urllib.request
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Optional, Sequence, Tuple, Union


class ServiceError(Exception):
    """The service refused or failed a request: `status` is the HTTP status (429: its queue is
    full, retry later; 503: it drains; 4xx: the request is wrong; 5xx: kbench failed),
    `message` its reason. Status 0: no instance answered before the client gave up."""

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
    #: The request's id (the client's, the same on every retry).
    id: Optional[str] = None
    #: The instance that answered, as its endpoint's URL.
    endpoint: Optional[str] = None
    #: Whether the reply was the result of an earlier judgement of the same request (a retry).
    replayed: bool = False

    @property
    def correct(self) -> bool:
        return self.verdict_class == "correct"

    @property
    def served(self) -> dict:
        """Where it was judged: instance, node and GPU (the record's `served`)."""
        return self.raw.get("evaluation", {}).get("served") or {}

    @classmethod
    def from_reply(cls, reply: dict, endpoint: Optional[str] = None) -> Result:
        interval = reply.get("interval")
        served = reply.get("evaluation", {}).get("served") or {}
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
            id=served.get("id"),
            endpoint=endpoint,
            replayed=bool(reply.get("replayed")),
        )


#: Errors that mean the connection failed or was lost, not that the service answered.
_LOST = (urllib.error.URLError, ConnectionError, http.client.HTTPException, TimeoutError, OSError)


class _Endpoint:
    """One instance as this client sees it."""

    def __init__(self, url: str) -> None:
        self.url = url.rstrip("/")
        #: ready, full, draining, down or unknown (not asked yet).
        self.state = "unknown"
        self.admitted = 0
        self.capacity = 1
        self.in_flight = 0
        self.checked = 0.0

    def load(self) -> float:
        return (self.admitted + self.in_flight) / max(1, self.capacity)


class Client:
    """A `kbench serve` at `url` (as the service prints it), or several instances of one run
    (`urls`, or `from_announced`), with the token if the service has one.

    Settings a request may choose: trials (int), budget (seconds), mode ("offline",
    "kernelbench", "server") and contract ("kbench", "kernelbench"); the rest are the service's.
    `retry_for`: how long a request is retried (full queues, draining or lost instances) before
    it fails: with the last refusal (429, 503), or status 0 when no instance answered.
    """

    #: How long an instance's load, and a `down` or `draining` state, is trusted before it is
    #: asked again.
    REFRESH_S = 2.0

    def __init__(
        self,
        url: Optional[str] = None,
        token: Optional[str] = None,
        timeout: float = 3600.0,
        *,
        urls: Optional[Sequence[str]] = None,
        retry_for: float = 600.0,
        discover: Optional[Callable[[], Sequence[str]]] = None,
    ) -> None:
        given = ([url] if url else []) + list(urls or [])
        if not given and discover is not None:
            given = list(discover())
        if not given and discover is None:
            raise ValueError("Client: give url, urls or an announcement folder")
        self.token = token
        self.timeout = timeout
        self.retry_for = retry_for
        self._discover = discover
        self._lock = threading.RLock()
        self._endpoints = [_Endpoint(u) for u in dict.fromkeys(given)]

    @classmethod
    def from_announced(cls, where: str, token: Optional[str] = None, **kwargs: Any) -> Client:
        """The instances that announce themselves in `where` (`serve --announce FILE`: a folder
        of such files, or a glob), read again whenever no known instance is ready."""

        def discover() -> list:
            pattern = os.path.join(where, "*") if os.path.isdir(where) else where
            found = []
            for path in sorted(glob.glob(pattern)):
                try:
                    with open(path) as f:
                        found.extend(line.strip() for line in f if line.strip())
                except OSError:
                    continue
            return found

        return cls(token=token, discover=discover, **kwargs)

    @property
    def url(self) -> str:
        """The first endpoint's URL."""
        return self._endpoints[0].url if self._endpoints else ""

    @property
    def endpoints(self) -> list:
        return [e.url for e in self._endpoints]

    def evaluate(self, task: str, source: str, id: Optional[str] = None, **settings: Any) -> Result:
        """Evaluate `source` (a submission's Python text) for `task` ("1/19", "level1/19_ReLU"
        or a task file of the service's tree); blocks until the verdict is in. `id` names the
        request (a fresh one when not given): retries, and a second call with the same id, get
        its one result."""
        body = {"task": task, "source": source, "settings": settings, "id": id or uuid.uuid4().hex}
        deadline = time.monotonic() + self.retry_for
        wait = 0.2
        last: Union[str, ServiceError] = "no instance known"
        same: Optional[_Endpoint] = None
        while True:
            endpoint = self._reserve(same) if same is not None and same.state == "ready" else self._pick()
            same = None
            if endpoint is None:
                last = self._none_ready()
            else:
                outcome = self._send(endpoint, body)
                if isinstance(outcome, Result):
                    return outcome
                last, lost = outcome
                if lost and endpoint.state == "ready":
                    # Still up after the connection was lost: it may be judging the request,
                    # so it is asked again (it waits for, or replays, its judgement), not another.
                    same = endpoint
            if time.monotonic() + wait > deadline or self._none_left():
                if isinstance(last, ServiceError):
                    raise last
                raise ServiceError(0, f"no instance judged the request within {self.retry_for:.0f} s: {last}")
            time.sleep(wait * (0.5 + random.random()))
            wait = min(wait * 2, 5.0)

    def _send(self, endpoint: _Endpoint, body: dict) -> Union[Result, Tuple[Union[str, ServiceError], bool]]:
        """The request sent to `endpoint` (reserved): its result, or why to send it again (the
        refusal, or what was lost) and whether the connection was lost (raises what no retry
        changes)."""
        try:
            reply = self._call("POST", "/v1/evaluate", body, url=endpoint.url)
            return Result.from_reply(reply, endpoint.url)
        except ServiceError as e:
            if e.status == 429:
                self._mark(endpoint, "full")
            elif e.status == 503:
                # Draining, or this request was left unfinished: the health says which.
                self._ready(endpoint)
            else:
                raise
            return e, False
        except _LOST as e:
            self._ready(endpoint)
            return f"{endpoint.url}: {e}", True
        finally:
            with self._lock:
                endpoint.in_flight -= 1

    def _none_ready(self) -> ServiceError:
        """Why no instance takes the request: 503 while one drains, else 0 (none answers)."""
        with self._lock:
            states = [(e.url, e.state) for e in self._endpoints]
        status = 503 if any(state == "draining" for _, state in states) else 0
        said = "; ".join(f"{url}: {state}" for url, state in states) or "no instance known"
        return ServiceError(status, f"no instance takes requests ({said})")

    def _none_left(self) -> bool:
        """Whether no instance can take a request, nor will: every one given drains or is gone,
        and none can be announced (with announcements, a new instance may come)."""
        with self._lock:
            gone = all(e.state in ("draining", "down") for e in self._endpoints)
        return gone and self._discover is None

    def _mark(self, endpoint: _Endpoint, state: str) -> None:
        with self._lock:
            endpoint.state = state
            endpoint.checked = time.monotonic()

    def _ready(self, endpoint: _Endpoint) -> bool:
        """Ask `endpoint` for its health; whether it takes requests."""
        try:
            health = self._call("GET", "/v1/health", url=endpoint.url, timeout=10.0)
        except ServiceError as e:
            self._mark(endpoint, "draining" if e.status == 503 else "down")
            return False
        except _LOST:
            self._mark(endpoint, "down")
            return False
        queue = health.get("queue", {})
        with self._lock:
            endpoint.admitted = int(queue.get("admitted", 0))
            endpoint.capacity = int(queue.get("capacity", 1))
            endpoint.state = "ready" if endpoint.admitted < endpoint.capacity else "full"
            endpoint.checked = time.monotonic()
        return True

    def _pick(self) -> Optional[_Endpoint]:
        """The ready instance with the least load, its health asked again where stale; the
        announcements read again when none is ready."""
        now = time.monotonic()
        for endpoint in list(self._endpoints):
            if now - endpoint.checked > self.REFRESH_S:
                self._ready(endpoint)
        ready = [e for e in self._endpoints if e.state == "ready"]
        if not ready and self._discover is not None:
            known = set(self.endpoints)
            with self._lock:
                self._endpoints += [_Endpoint(u) for u in dict.fromkeys(self._discover()) if u not in known]
            ready = [e for e in self._endpoints if e.state == "ready" or (e.state == "unknown" and self._ready(e))]
        if not ready:
            return None
        with self._lock:
            return self._reserve(min(ready, key=_Endpoint.load))

    def _reserve(self, endpoint: _Endpoint) -> _Endpoint:
        """`endpoint`, with one more request of this client in flight there (counted as it is
        picked, so that requests picked at once spread)."""
        with self._lock:
            endpoint.in_flight += 1
        return endpoint

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
        """The first endpoint's health (`status`: ready; a 503 ServiceError while it drains)."""
        return self._call("GET", "/v1/health")

    def tasks(self) -> list[dict]:
        """The tasks the service evaluates: each with its id ("1/19") and name."""
        return self._call("GET", "/v1/tasks")["tasks"]

    def shutdown(self) -> None:
        """Ask every instance to stop once the requests it admitted are answered (one that is
        gone already is passed over)."""
        for endpoint in self._endpoints:
            try:
                self._call("POST", "/v1/shutdown", {}, url=endpoint.url, timeout=30.0)
            except _LOST:
                if len(self._endpoints) == 1:
                    raise

    def _call(
        self,
        method: str,
        path: str,
        body: Optional[dict] = None,
        url: Optional[str] = None,
        timeout: Optional[float] = None,
    ) -> dict:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request((url or self.url) + path, data=data, method=method)
        request.add_header("Content-Type", "application/json")
        if self.token:
            request.add_header("Authorization", f"Bearer {self.token}")
        try:
            with urllib.request.urlopen(request, timeout=timeout or self.timeout) as reply:
                return json.loads(reply.read())
        except urllib.error.HTTPError as e:
            text = e.read().decode(errors="replace")
            try:
                message = json.loads(text)["error"]
            except (ValueError, KeyError, TypeError):
                message = text
            raise ServiceError(e.code, message) from None
