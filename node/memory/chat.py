"""One chat turn against any OpenAI-compatible ``/chat/completions`` endpoint.

The only client of a language model in the node: the optional search stage
(``node.memory.search.llm_stage``: HyDE, rerank) and the dream's LLM synthesiser
(``node.memory.working.dream.llm``) both send their turns through
:func:`chat_completion`. The endpoint is a remote party: the reply is read as
a stream and refused past ``max_reply_bytes``, redirects are not followed, and
anything that is not a chat completion with text content is an
:class:`LlmError`, never an exception of another kind.
"""

from __future__ import annotations

import json
import time
from typing import Any

import httpx

from node.errors import CrystalmeshError
from protocol.codec import json_too_deep

MAX_REPLY_DEPTH = 32
"""A chat completion nests 4 deep; a reply nesting deeper is refused before ``json.loads`` recurses."""


class LlmError(CrystalmeshError, RuntimeError):
    """The LLM endpoint failed or answered something unusable."""

    http_status = 502
    code = "llm"


def chat_completion(client: httpx.Client, url: str, body: dict[str, Any], max_reply_bytes: int,
                    headers: dict[str, str] | None = None, deadline_s: float | None = None) -> str:
    """The assistant's text for one request ``body`` POSTed to ``url``; :class:`LlmError`
    on an unreachable endpoint, a non-200 answer, a reply over ``max_reply_bytes``, or a
    reply that is not a chat completion with text content.

    ``deadline_s`` bounds the whole answer, not only each read: an endpoint that drips a byte
    just inside the client's read timeout is cut off once the deadline has passed."""
    started = time.monotonic()
    try:
        with client.stream("POST", url, json=body, headers=headers) as response:
            if response.status_code != 200:
                raise LlmError(f"the LLM endpoint answered HTTP {response.status_code}")
            chunks, size = [], 0
            for chunk in response.iter_bytes():
                size += len(chunk)
                if size > max_reply_bytes:
                    raise LlmError(f"the LLM reply is larger than {max_reply_bytes} bytes")
                if deadline_s is not None and time.monotonic() - started > deadline_s:
                    raise LlmError(f"the LLM endpoint took longer than {deadline_s:g} s")
                chunks.append(chunk)
    except httpx.HTTPError as error:
        raise LlmError(f"the LLM endpoint is unreachable: {type(error).__name__}") from error
    body_bytes = b"".join(chunks)
    if json_too_deep(body_bytes, MAX_REPLY_DEPTH):
        raise LlmError("the LLM endpoint's reply nests too deep")
    try:
        content = json.loads(body_bytes)["choices"][0]["message"]["content"]
    except (ValueError, KeyError, IndexError, TypeError) as error:
        raise LlmError("the LLM endpoint's reply is not a chat completion") from error
    if not isinstance(content, str):
        raise LlmError("the LLM reply content is not text")
    return content
