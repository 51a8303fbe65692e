"""The Python client (clients/python) against fake instances of `kbench serve`: requests spread by
load, sent again with the same id on a full queue, a draining or dead instance and a connection
lost mid-request, and each request judged once."""

import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "clients" / "python" / "src"))

from kbench_client import Client, ServiceError  # noqa: E402


class Fake:
    """One instance: its queue's load, whether it drains, and what its next evaluation requests
    do ("ok", "400", "429", "503", "drop": judge, then close the connection without a reply). Counts
    the judgements per request id; a known id is answered from its judgement."""

    def __init__(self, admitted=0, capacity=16):
        self.admitted, self.capacity = admitted, capacity
        self.draining = False
        self.script = []
        self.judged = {}
        self.asked = 0
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def reply(self, status, body):
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                if fake.draining:
                    return self.reply(503, {"error": "draining"})
                self.reply(200, {"status": "ready", "queue": {"admitted": fake.admitted, "capacity": fake.capacity}})

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                fake.asked += 1
                if fake.draining:
                    return self.reply(503, {"error": "the service is draining"})
                action = fake.script.pop(0) if fake.script else "ok"
                if action in ("400", "429", "503"):
                    return self.reply(int(action), {"error": action})
                rid = body["id"]
                replayed = rid in fake.judged
                if not replayed:
                    fake.judged[rid] = 1
                if action == "drop":
                    self.close_connection = True
                    self.connection.shutdown(2)
                    return
                self.reply(200, reply(body, fake.url, replayed))

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


def reply(body, url, replayed):
    return {
        "task": body["task"],
        "file": "level1/19_ReLU/000000.py",
        "verdict": "pass",
        "class": "correct",
        "reason": "",
        "speedup": 1.0,
        "interval": [0.9, 1.1],
        "label": "SAME",
        "replayed": replayed,
        "evaluation": {"served": {"id": body["id"], "instance": url, "node": "n", "gpu": 0}},
    }


@pytest.fixture
def fakes():
    made = []

    def make(**kwargs):
        made.append(Fake(**kwargs))
        return made[-1]

    yield make
    for fake in made:
        fake.stop()


def test_requests_go_to_the_instance_with_the_least_load(fakes):
    busy, idle = fakes(admitted=12), fakes(admitted=0)
    client = Client(urls=[busy.url, idle.url])
    for _ in range(3):
        assert client.evaluate("1/19", "src").endpoint == idle.url
    assert busy.asked == 0
    # Once the other is as loaded, both take requests.
    busy.admitted = 0
    client = Client(urls=[busy.url, idle.url])
    results = client.evaluate_many([("1/19", "src")] * 8, concurrency=8)
    assert {r.endpoint for r in results} == {busy.url, idle.url}


def test_a_full_queue_or_a_draining_instance_sends_the_request_elsewhere_with_its_id(fakes):
    full, other = fakes(), fakes(admitted=1)
    full.script = ["429"]
    client = Client(urls=[full.url, other.url])
    result = client.evaluate("1/19", "src", id="req-1")
    assert (result.endpoint, result.id, result.replayed) == (other.url, "req-1", False)
    draining = fakes()
    draining.draining = True
    client = Client(urls=[draining.url, other.url])
    assert all(client.evaluate("1/19", "src").endpoint == other.url for _ in range(3))
    assert draining.asked == 0


def test_a_connection_lost_mid_request_asks_the_same_instance_and_judges_once(fakes):
    first, second = fakes(), fakes(admitted=5)
    first.script = ["drop"]
    client = Client(urls=[first.url, second.url], retry_for=30)
    result = client.evaluate("1/19", "src", id="req-2")
    assert result.endpoint == first.url and result.replayed
    assert first.judged == {"req-2": 1} and second.judged == {}


def test_a_dead_instance_s_requests_go_to_the_others(fakes):
    dead, alive = fakes(), fakes(admitted=3)
    dead.stop()
    client = Client(urls=[dead.url, alive.url], retry_for=30)
    results = client.evaluate_many([("1/19", "src")] * 4, concurrency=2)
    assert [r.endpoint for r in results] == [alive.url] * 4


def test_no_instance_left_fails_at_once_with_the_last_refusal(fakes):
    gone = fakes()
    gone.stop()
    with pytest.raises(ServiceError) as e:
        Client(gone.url, retry_for=600).evaluate("1/19", "src")
    assert e.value.status == 0
    # A service that drains, given alone: its 503 at once, not after retry_for.
    draining = fakes()
    draining.draining = True
    started = time.monotonic()
    with pytest.raises(ServiceError) as e:
        Client(draining.url, retry_for=600).evaluate("1/19", "src")
    assert e.value.status == 503 and time.monotonic() - started < 60


def test_a_503_is_sent_again_and_a_wrong_request_is_not(fakes):
    fake = fakes()
    fake.script = ["503"]
    client = Client(fake.url, retry_for=30)
    # A 503 of its evaluation (say, left unfinished by a stop): sent again once it is ready.
    assert client.evaluate("1/19", "src").verdict == "pass"
    assert fake.asked == 2
    fake.script = ["400"]
    with pytest.raises(ServiceError) as e:
        client.evaluate("1/19", "src")
    assert e.value.status == 400 and fake.asked == 3


def test_instances_are_found_through_their_announcements(fakes, tmp_path):
    a, b = fakes(), fakes()
    (tmp_path / "a").write_text(a.url + "\n")
    client = Client.from_announced(str(tmp_path), retry_for=30)
    assert client.endpoints == [a.url]
    a.draining = True
    (tmp_path / "b").write_text(b.url + "\n")
    assert client.evaluate("1/19", "src").endpoint == b.url
    assert client.endpoints == [a.url, b.url]
