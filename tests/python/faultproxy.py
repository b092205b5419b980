"""A loopback TCP proxy in front of PostgreSQL that can lose a reply.

Armed with a byte pattern, it forwards the client's message that contains it to
the server, waits for the server's first reply bytes (so the statement has run
and, in autocommit, committed) and then drops that reply and cuts both sides:
the client sees a lost connection with its commit outcome unknown.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator


class FaultProxy:
    def __init__(self, target_port: int, target_host: str = "127.0.0.1") -> None:
        self.target = (target_host, target_port)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self.listener.getsockname()[1])
        self._trigger: bytes | None = None
        self._lock = threading.Lock()
        self.dropped = 0
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def arm(self, pattern: bytes) -> None:
        """Lose the reply to the next client message containing ``pattern`` (once)."""
        with self._lock:
            self._trigger = pattern

    def close(self) -> None:
        self._closed = True
        with contextlib.suppress(OSError):
            self.listener.close()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            server = socket.create_connection(self.target)
            lose_reply = threading.Event()
            threading.Thread(target=self._upstream, args=(client, server, lose_reply), daemon=True).start()
            threading.Thread(target=self._downstream, args=(server, client, lose_reply), daemon=True).start()

    def _upstream(self, client: socket.socket, server: socket.socket, lose_reply: threading.Event) -> None:
        with contextlib.suppress(OSError):
            while data := client.recv(65536):
                with self._lock:
                    if self._trigger is not None and self._trigger in data:
                        self._trigger = None
                        lose_reply.set()
                server.sendall(data)
        _shut(server)

    def _downstream(self, server: socket.socket, client: socket.socket, lose_reply: threading.Event) -> None:
        with contextlib.suppress(OSError):
            while data := server.recv(65536):
                if lose_reply.is_set():
                    self.dropped += 1
                    break
                client.sendall(data)
        _shut(client)
        _shut(server)


def _shut(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
    with contextlib.suppress(OSError):
        sock.close()


@contextlib.contextmanager
def fault_proxy(target_port: int) -> Iterator[FaultProxy]:
    proxy = FaultProxy(target_port)
    try:
        yield proxy
    finally:
        proxy.close()
