"""ASGI middleware that guards the app before any route runs."""

from __future__ import annotations

from collections.abc import MutableMapping
from typing import Any

from fastapi.responses import JSONResponse


class BodyLimitMiddleware:
    """Reads at most ``max_bytes`` of a request body before the app sees it; more gives 413 at once, bytes
    that are not UTF-8 give 400.

    Chunked bodies carry no Content-Length, so the count is made on the bytes themselves.
    """

    def __init__(self, app: Any, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: MutableMapping[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope.get("method") in ("GET", "HEAD", "OPTIONS"):
            await self.app(scope, receive, send)
            return
        too_big = JSONResponse(
            {"detail": f"request body is larger than the limit max_body_bytes ({self.max_bytes} bytes)"},
            status_code=413,
            headers={"Connection": "close"},
        )
        for name, value in scope.get("headers", ()):
            if name == b"content-length":
                try:
                    declared = int(value)
                except ValueError:
                    declared = -1
                if declared > self.max_bytes:
                    await too_big(scope, receive, send)
                    return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            body = message.get("body", b"")
            size += len(body)
            if size > self.max_bytes:
                await too_big(scope, receive, send)
                return
            chunks.append(body)
            if not message.get("more_body", False):
                break
        data = b"".join(chunks)
        try:
            data.decode("utf-8")
        except UnicodeDecodeError as exc:
            # JSON bodies must be UTF-8 (RFC 8259); say so rather than a generic parse failure.
            await JSONResponse(
                {"detail": f"request body is not valid UTF-8 (byte {data[exc.start]:#04x} at offset {exc.start})"},
                status_code=400,
            )(scope, receive, send)
            return
        replay = {"type": "http.request", "body": data, "more_body": False}
        sent = False

        async def replay_receive() -> dict[str, Any]:
            nonlocal sent
            if not sent:
                sent = True
                return replay
            return dict(await receive())

        await self.app(scope, replay_receive, send)
