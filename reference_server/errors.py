"""API errors: one exception, rendered in each dialect's JSON at the boundary.

    ApiError(kind, message)            raised anywhere in request handling
      kind -> (Anthropic status, type) and (OpenAI status, type, code)

Anything else that escapes a handler is a bug and becomes 500 api_error; bad
input must always map to one of the 4xx kinds below.
"""

from __future__ import annotations

import json

# kind: (anthropic status, anthropic type, openai status, openai type, openai code)
_KINDS: dict[str, tuple[int, str, int, str, str | None]] = {
    "invalid_request": (400, "invalid_request_error", 400, "invalid_request_error", None),
    "authentication": (
        401,
        "authentication_error",
        401,
        "invalid_request_error",
        "invalid_api_key",
    ),
    "not_found": (404, "not_found_error", 404, "invalid_request_error", "model_not_found"),
    "route_not_found": (404, "not_found_error", 404, "invalid_request_error", "not_found"),
    "method_not_allowed": (405, "invalid_request_error", 405, "invalid_request_error", None),
    "request_timeout": (408, "invalid_request_error", 408, "invalid_request_error", "timeout"),
    "too_large": (413, "request_too_large", 413, "invalid_request_error", "request_too_large"),
    "unsupported_media_type": (
        415,
        "invalid_request_error",
        415,
        "invalid_request_error",
        "unsupported_media_type",
    ),
    "rate_limit": (429, "rate_limit_error", 429, "rate_limit_exceeded", "rate_limit_exceeded"),
    "api_error": (500, "api_error", 500, "server_error", None),
    "overloaded": (529, "overloaded_error", 503, "server_overloaded", "overloaded"),
}


class ApiError(Exception):
    def __init__(self, kind: str, message: str, headers: list[tuple[bytes, bytes]] | None = None):
        if kind not in _KINDS:
            raise ValueError(f"unknown error kind {kind!r}")
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.headers = headers or []


def render(err: ApiError, dialect: str, request_id: str) -> tuple[int, bytes]:
    """(status, JSON body) in the dialect's error shape."""
    a_status, a_type, o_status, o_type, o_code = _KINDS[err.kind]
    if dialect == "anthropic":
        body = {
            "type": "error",
            "error": {"type": a_type, "message": err.message},
            "request_id": request_id,
        }
        return a_status, json.dumps(body).encode()
    body_o = {"error": {"message": err.message, "type": o_type, "param": None, "code": o_code}}
    return o_status, json.dumps(body_o).encode()


def stream_error_type(dialect: str, kind: str) -> str:
    return _KINDS[kind][1] if dialect == "anthropic" else _KINDS[kind][3]
