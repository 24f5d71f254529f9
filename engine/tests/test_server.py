"""Hostile requests against the HTTP layer: forged Host headers (DNS rebinding) and oversized bodies."""

import json
import socket
import threading
import unittest

from coa_engine import server
from coa_engine.server import EngineServer, host_allowed


class StubWorker:
    """Only /health and /v1/models are called here; neither needs a model."""

    model_name, max_seq_len = "stub", 64


def exchange(port: int, head: str, body: bytes = b"") -> tuple[int, dict]:
    """One raw request with Connection: close; returns the status and the JSON reply."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(f"{head}\r\nConnection: close\r\n\r\n".encode() + body)
        reply = b""
        while chunk := sock.recv(65536):
            reply += chunk
    head_bytes, _, payload = reply.partition(b"\r\n\r\n")
    return int(head_bytes.split()[1]), json.loads(payload)


class HostileRequestTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = EngineServer(StubWorker(), "127.0.0.1", 0)
        cls.port = cls.server.server_address[1]
        threading.Thread(target=cls.server.serve_forever, daemon=True).start()

    @classmethod
    def tearDownClass(cls):
        cls.server.shutdown()
        cls.server.server_close()

    def test_the_clients_own_host_headers_pass(self):
        for host in (f"127.0.0.1:{self.port}", f"localhost:{self.port}", f"[::1]:{self.port}"):
            status, payload = exchange(self.port, f"GET /health HTTP/1.1\r\nHost: {host}")
            self.assertEqual((status, payload), (200, {"status": "ok"}), host)

    def test_a_forged_host_header_is_refused_with_403(self):
        for host in ("evil.example", f"evil.example:{self.port}", f"127.0.0.1.evil.example:{self.port}", "127.0.0.1:1"):
            status, payload = exchange(self.port, f"GET /v1/models HTTP/1.1\r\nHost: {host}")
            self.assertEqual(status, 403, host)
            self.assertIn("DNS rebinding", payload["error"]["message"])
            self.assertNotIn("data", payload)
        status, _ = exchange(self.port, "GET /health HTTP/1.1")  # no Host at all
        self.assertEqual(status, 403)

    def test_an_oversized_body_is_refused_with_413_before_it_is_read(self):
        length = server.MAX_BODY_BYTES + 1
        status, payload = exchange(
            self.port,
            f"POST /tokenize HTTP/1.1\r\nHost: 127.0.0.1:{self.port}\r\nContent-Length: {length}",
            b"{" * 4096,  # a fraction of what it claims: the server must answer without waiting for the rest
        )
        self.assertEqual(status, 413)
        self.assertIn("over the 67108864 byte limit", payload["error"]["message"])

    def test_a_bad_content_length_is_refused_with_400(self):
        for value in ("-5", "lots"):
            status, payload = exchange(
                self.port, f"POST /tokenize HTTP/1.1\r\nHost: 127.0.0.1:{self.port}\r\nContent-Length: {value}"
            )
            self.assertEqual(status, 400, value)
            self.assertIn("Content-Length", payload["error"]["message"])


class HostAllowedTest(unittest.TestCase):
    def test_explicit_and_wildcard_binds(self):
        self.assertTrue(host_allowed("engine.lan", 9000, "Engine.lan:9000"))
        self.assertFalse(host_allowed("engine.lan", 9000, "other.lan:9000"))
        self.assertTrue(host_allowed("0.0.0.0", 9000, "192.168.1.20:9000"))
        self.assertFalse(host_allowed("0.0.0.0", 9000, "evil.example:9000"))
        self.assertTrue(host_allowed("127.0.0.1", 80, "localhost"))
        self.assertFalse(host_allowed("127.0.0.1", 9000, None))


if __name__ == "__main__":
    unittest.main()
