"""A TCP proxy on loopback that can cut every connection through it: dropped watches on demand."""

from __future__ import annotations

import contextlib
import socket
import threading


class DroppingProxy:
    """Forward 127.0.0.1:port to a target; ``drop()`` resets every open connection."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.connections: list[socket.socket] = []
        self.lock = threading.Lock()
        self.dropped = 0
        self.closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self.closed:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self.target_port))
            with self.lock:
                self.connections += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)

    def drop(self) -> int:
        """Reset every connection open now; return how many were cut."""
        with self.lock:
            victims, self.connections = self.connections, []
        for s in victims:
            try:
                s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
                s.close()
            except OSError:
                pass
        self.dropped += len(victims) // 2
        return len(victims) // 2

    def close(self) -> None:
        self.closed = True
        self.listener.close()
        self.drop()
