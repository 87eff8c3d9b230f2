"""A small TCP proxy in front of one redis-server, which can cut its clients off: ``cut(s)``
drops every open connection and refuses new ones for ``s`` seconds (the listening socket is
closed, so connects get ECONNREFUSED), then listens again on the same port. It is how a test
takes the network away from producers and workers without touching the server's data."""

from __future__ import annotations

import contextlib
import socket
import threading
import time

from ..redis_server import StopsOnExit

__all__ = ["Proxy"]

CHUNK = 65536


class Proxy(StopsOnExit):
    def __init__(self, target_port: int, host: str = "127.0.0.1") -> None:
        self.host = host
        self.target_port = target_port
        self._lock = threading.Lock()
        self._sockets: set[socket.socket] = set()
        self._stopped = threading.Event()
        self._listener = self._listen(0)
        self.port: int = self._listener.getsockname()[1]
        self._acceptor = self._start_acceptor()

    @property
    def url(self) -> str:
        return f"redis://{self.host}:{self.port}/0"

    def _listen(self, port: int) -> socket.socket:
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((self.host, port))
        listener.listen(128)
        listener.settimeout(0.1)  # so that the accept loop sees cut() and stop()
        return listener

    def _start_acceptor(self) -> threading.Thread:
        thread = threading.Thread(target=self._accept, args=(self._listener,), daemon=True)
        thread.start()
        return thread

    def _accept(self, listener: socket.socket) -> None:
        while not self._stopped.is_set() and listener is self._listener:
            try:
                client, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return  # closed by cut() or stop()
            try:
                upstream = socket.create_connection((self.host, self.target_port), timeout=2)
            except OSError:
                client.close()
                continue
            for sock in (client, upstream):
                sock.settimeout(None)
            with self._lock:
                self._sockets |= {client, upstream}
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    def _pipe(self, source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(CHUNK):
                sink.sendall(data)
        except OSError:
            pass
        finally:
            self._drop(source, sink)

    def _drop(self, *socks: socket.socket) -> None:
        with self._lock:
            self._sockets -= set(socks)
        for sock in socks:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()

    def drop_all(self) -> None:
        with self._lock:
            open_now = list(self._sockets)
        self._drop(*open_now)

    def cut(self, seconds: float) -> None:
        """Drop every connection and refuse new ones for ``seconds``; blocks that long."""
        listener = self._listener
        listener.close()
        self.drop_all()
        self._acceptor.join(1)
        time.sleep(seconds)
        self._listener = self._listen(self.port)
        self._acceptor = self._start_acceptor()

    def stop(self) -> None:
        self._stopped.set()
        self._listener.close()
        self.drop_all()
        self._acceptor.join(1)
