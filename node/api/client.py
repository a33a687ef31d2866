"""The typed client of a running node's local HTTP API (the CLI, the MCP server, the devnet tools).

Every route a caller uses is a method here, grouped as the node's concepts are
(node, memory, working memory, learning, skills and market, bounties, trust,
weather); this module is the one place outside ``node/api`` that knows the
``/v1`` paths. A method returns the route's JSON, unwrapped where the route
wraps a single list (``{"hits": [...]}`` -> the hits), typed by the answer's shape
(``node.api.shapes``: plain dicts at run time, named keys for mypy). ``get``/``post``/``request``
stay public for scripts and tests that speak to a route directly.

With no node running, ``node.cli.local.LocalNode`` answers the memory methods
under the same names from the data dir itself.
"""

from __future__ import annotations

import base64
import os
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, cast

import httpx

from node.config import NodeConfig
from node.keyfiles import read_secret

if TYPE_CHECKING:
    from node.api import shapes
    from node.api.models import SearchIn
    from node.memory import Document, FileState, TranscriptChunk

Json = dict[str, Any]
# Skills per ``POST /v1/skills/publish`` call (a few signed batches): the unit of progress.
CATALOGUE_CHUNK = 128


class ApiError(RuntimeError):
    """The node answered with an error, or could not be reached."""

    def __init__(self, message: str, status: int = 0, code: str = "") -> None:
        super().__init__(message)
        self.status = status
        self.code = code


def pid_alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie still answers kill(0); look at its state.
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(") ", 1)[1][:1] != "Z"
    except OSError:
        return True


def _present(body: Json) -> Json:
    """``body`` without its unset (None) fields."""
    return {key: value for key, value in body.items() if value is not None}


def add_body(text: str, *, semantic_type: str | None = None, scope: str | None = None, path: str | None = None,
             ttl_ms: int | None = None, category: str | None = None, tags: Sequence[str] | None = None,
             namespace: str | None = None, importance: float | None = None, lifespan: str | None = None) -> Json:
    """The "add a memory" request (``POST /v1/crystals``) as ``memory_add``'s arguments spell it;
    ``LocalNode`` hands the same body to the same operation."""
    return _present({"text": text, "type": semantic_type, "scope": scope, "path": path, "ttl_ms": ttl_ms,
                     "category": category, "tags": None if tags is None else list(tags), "namespace": namespace,
                     "importance": importance, "lifespan": lifespan})


def update_body(text: str | None = None, scope: str | None = None) -> Json:
    """The "new version" request (``PATCH /v1/crystals/{id}``): the new text and/or scope."""
    return _present({"text": text, "scope": scope})


def skill_body(text: str, *, scope: str, category: str | None = None, tags: Sequence[str] = (),
               namespace: str | None = None) -> Json:
    """The "add a skill" request (``POST /v1/crystals`` with type skill), as ``add_skill`` spells it."""
    return {"text": text, "type": "skill", "scope": scope, "category": category, "tags": list(tags),
            "namespace": namespace}


def _export_summary(header: str) -> Json:
    """The export's summary the node sends in a header (as ``export_jsonl`` returned it)."""
    import json

    from protocol.codec import json_too_deep

    if len(header) > 16_384 or json_too_deep(header.encode(), 8):
        raise ApiError("the node's export summary is oversized")
    summary = json.loads(header)
    if not isinstance(summary, dict):
        raise ApiError("the node's export summary is not an object")
    return summary


class ApiClient:
    def __init__(self, base_url: str, token: str, timeout_s: float = 60.0) -> None:
        self.base_url = base_url.rstrip("/")
        self.token = token
        self._client = httpx.Client(
            base_url=self.base_url,
            headers={"Authorization": f"Bearer {token}"},
            timeout=timeout_s,
        )

    def close(self) -> None:
        self._client.close()

    def request(self, method: str, path: str, json: Any = None, params: Any = None) -> Any:
        try:
            response = self._client.request(method, path, json=json, params=params)
        except httpx.HTTPError as exc:
            raise ApiError(f"cannot reach the node at {self.base_url}: {exc}") from exc
        if response.status_code >= 400:
            self._raise_for(response)
        try:
            return response.json()
        except ValueError:
            return {"error": response.text[:200]}

    @staticmethod
    def _raise_for(response: httpx.Response) -> None:
        """The node's error answer as an :class:`ApiError` (its message and code)."""
        try:
            data = response.json()
        except ValueError:
            data = {"error": response.text[:200]}
        message = data.get("error") if isinstance(data, dict) else str(data)
        code = data.get("code", "") if isinstance(data, dict) else ""
        raise ApiError(str(message), response.status_code, str(code))

    def get(self, path: str, **params: Any) -> Any:
        return self.request("GET", path, params={k: v for k, v in params.items() if v is not None})

    def post(self, path: str, body: Any = None) -> Any:
        return self.request("POST", path, json=body or {})

    # --- node ---------------------------------------------------------------------------------
    def status(self) -> shapes.Status:
        """Peer id, listen addresses, peers, listings, crystals, wallet, weather."""
        return cast("shapes.Status", self.get("/v1/status"))

    def peers(self) -> list[Json]:
        return list(self.get("/v1/peers")["peers"])

    def dashboard_login_link(self) -> Json:
        """A one-time dashboard login path (``path``, relative to ``base_url``)."""
        return dict(self.post("/v1/dashboard/login-link"))

    # --- memory -------------------------------------------------------------------------------
    def memory_add(self, text: str, *, semantic_type: str | None = None, scope: str | None = None,
                   path: str | None = None, ttl_ms: int | None = None, category: str | None = None,
                   tags: Sequence[str] | None = None, namespace: str | None = None,
                   importance: float | None = None, lifespan: str | None = None) -> shapes.StoredCrystal:
        """Store a memory; the crystal with ``outcome`` "created" or "exists" (and what ``differs``).
        ``importance``: stated explicitly, a floor it never decays below; ``lifespan``
        "permanent": pinned."""
        return cast("shapes.StoredCrystal", self.post("/v1/crystals", add_body(
            text, semantic_type=semantic_type, scope=scope, path=path, ttl_ms=ttl_ms, category=category,
            tags=tags, namespace=namespace, importance=importance, lifespan=lifespan)))

    def memory_set_lifespan(self, crystal_id: str, lifespan: str) -> shapes.PinnedCrystal:
        """Pin (``permanent``: never expires by decay) or unpin (``decay``) a memory."""
        return cast("shapes.PinnedCrystal", self.post(f"/v1/crystals/{crystal_id}/lifespan", {"lifespan": lifespan}))

    def memory_get(self, crystal_id: str) -> shapes.CrystalDetail:
        """One crystal (any version) with its audit trail and what the node knows of it."""
        return cast("shapes.CrystalDetail", self.get(f"/v1/crystals/{crystal_id}"))

    def memory_search(self, query: str | SearchIn, k: int = 10, **filters: Any) -> list[shapes.Hit]:
        """Hybrid search of one namespace (default "default"), or of all; the hits, best first,
        each with its ``origin``. ``query``: a :class:`SearchIn`, or the query text with
        ``filters`` named as its fields (``types``, ``namespace``, ``sources``, ...)."""
        # pydantic and the memory's limits, imported here: not every client searches.
        from node.api.models import SearchIn

        request = SearchIn.coerce(query, k, **filters)
        return cast("shapes.Hits", self.post("/v1/crystals/search", request.wire()))["hits"]

    def memory_list(self, namespace: str | None = None, types: Sequence[str] = (),
                    limit: int = 50) -> list[shapes.Crystal]:
        """The newest current memories of a namespace."""
        return cast("shapes.Crystals", self.get("/v1/crystals", namespace=namespace, type=list(types) or None,
                                         limit=limit))["crystals"]

    def memory_update(self, crystal_id: str, text: str | None = None,
                      scope: str | None = None) -> shapes.UpdatedCrystal:
        """A new version of a memory (new text and/or scope); the old one is closed."""
        return cast("shapes.UpdatedCrystal", self.request("PATCH", f"/v1/crystals/{crystal_id}",
                                                          json=update_body(text, scope)))

    def memory_delete(self, crystal_id: str) -> Json:
        return dict(self.request("DELETE", f"/v1/crystals/{crystal_id}"))

    def memory_history(self, crystal_id: str) -> shapes.History:
        """Every version of a memory and every transition."""
        return cast("shapes.History", self.get(f"/v1/crystals/{crystal_id}/history"))

    def memory_status(self) -> Json:
        return dict(self.get("/v1/memory/status"))

    def memory_consolidate(self, purge: bool = False, at: str | None = None, dry_run: bool = False) -> Json:
        """One consolidation cycle now or as of ``at`` (``+90d``, ``2026-06-01``); ``dry_run``:
        what it would do (``forgotten``), nothing written."""
        return dict(self.post("/v1/memory/consolidate", _present(
            {"purge": purge, "at": at, "dry_run": dry_run or None})))

    def memory_ingest_conversation(self, content_b64: str, *, namespace: str | None = None,
                                   semantic_type: str | None = None,
                                   progress: Callable[[int, int], None] | None = None) -> Json:
        """Store a conversation file's new turns (the file base64); what was added. One request:
        the node reports no ``progress``."""
        return dict(self.post("/v1/memory/conversations", _present({
            "content_b64": content_b64, "namespace": namespace, "type": semantic_type})))

    def memory_export(self, path: str, progress: Callable[[int, int], None] | None = None) -> Json:
        """Write the node's portable JSONL export (``GET /v1/memory/export``) to a new 0600 file at
        ``path``, streamed (never held whole); it replaces ``path`` only once complete."""
        from pathlib import Path

        from node.memory import finish_private, open_private

        target = Path(path)
        handle, temporary = open_private(target)
        complete = False
        try:
            with self._client.stream("GET", "/v1/memory/export", timeout=None) as response:
                if response.status_code >= 400:
                    response.read()
                    self._raise_for(response)
                total = int(response.headers.get("content-length") or 0)
                done = 0
                for chunk in response.iter_bytes(1024 * 1024):
                    handle.write(chunk)
                    done += len(chunk)
                    if progress is not None:
                        progress(done, total)
                summary = _export_summary(response.headers.get("x-crystalmesh-export-summary") or "{}")
            complete = True
        except httpx.HTTPError as exc:
            raise ApiError(f"cannot reach the node at {self.base_url}: {exc}") from exc
        finally:
            finish_private(handle, temporary, target, complete)
        return summary | {"bytes": done, "path": str(target)}

    def memory_ingest_transcript(self, path: str, *, format: str | None = None, namespace: str | None = None,
                                 progress: Callable[[int, int], None] | None = None) -> Json:
        """Store what the node has not read of a session transcript (Claude Code, Codex or messages
        JSONL): the file is read here, from where the node stopped, and sent in chunks of complete
        lines; ``progress(offset, size)`` after each. The summary of what was stored."""
        from node.memory import feed_transcript

        return feed_transcript(path, self.memory_transcript_cursor, self.memory_ingest_transcript_chunk,
                               format=format, namespace=namespace, progress=progress)

    def memory_transcript_cursor(self, transcript: str, namespace: str | None = None) -> Json:
        """Where the node stopped reading a transcript (``offset``, ``fingerprint``, ``format``...)."""
        return dict(self.get("/v1/memory/transcripts/cursor", transcript=transcript, namespace=namespace))

    def memory_ingest_transcript_chunk(self, chunk: TranscriptChunk) -> Json:
        """Send one chunk of complete lines; what the node stored and its new ``offset``."""
        return dict(self.post("/v1/memory/transcripts", _present({
            "transcript": chunk.transcript, "fingerprint": chunk.fingerprint, "offset": chunk.offset,
            "end_offset": chunk.end_offset, "data_b64": base64.b64encode(chunk.data).decode("ascii"),
            "format": chunk.format, "namespace": chunk.namespace})))
    # --- indexed files (docs/memory.md, "Files"): this process reads, the node stores --------
    max_document_bytes = 640 * 1024  # one file, base64 in one request, under the node's 1 MiB body limit

    def known_files(self, namespace: str | None, root: str) -> dict[str, FileState]:
        """What the node's index holds of the files under ``root`` (size, mtime, all chunks current)."""
        from node.memory import FileState

        data = self.get("/v1/memory/files", root=root, namespace=namespace)
        return {str(path): FileState(int(size), int(mtime_ns), bool(fresh))
                for path, size, mtime_ns, fresh in data["files"]}

    def sync_files(self, namespace: str | None, documents: Sequence[Document],
                   removed: dict[str, str]) -> Json:
        """One batch of a re-sync: files read here (their bytes base64), and the paths that left."""
        return dict(self.post("/v1/memory/files/sync", _present({
            "namespace": namespace, "removed": removed,
            "documents": [{"path": d.path, "size": d.size, "mtime_ns": d.mtime_ns,
                           "content_b64": base64.b64encode(d.content).decode("ascii")} for d in documents]})))

    def memory_index(self, paths: Sequence[str], *, namespace: str | None = None,
                     max_file_bytes: int | None = None, exclude: Sequence[str] = (),
                     progress: Callable[[str], None] | None = None) -> Json:
        """Index files and folders (``memory index``): read in this process, sent in batches;
        ``exclude``: never read (the node's data dir)."""
        from node.memory import IndexOptions, index_paths

        options = IndexOptions(namespace, max_file_bytes or self.max_document_bytes, tuple(exclude))
        return index_paths(self, paths, options, progress)

    def memory_neighbours(self, crystal_id: str, window: int = 2) -> Json:
        """The turns of a session within ``window`` turns of a conversation turn's memory."""
        return dict(self.get(f"/v1/crystals/{crystal_id}/neighbours", window=window))

    # --- working memory (seed 001) ------------------------------------------------------------
    def memory_note(self, text: str, importance: float, namespace: str, semantic_type: str | None = None,
                    scope: str | None = None, lifespan: str | None = None) -> shapes.Note:
        """A scratch note (durable at once) that also becomes a searchable crystal; what was
        noted is explicit: its importance is a floor (``lifespan`` "permanent": also pinned)."""
        return cast("shapes.Note", self.post("/v1/memory/notes", _present({
            "text": text, "type": semantic_type, "scope": scope, "namespace": namespace,
            "importance": importance, "lifespan": lifespan})))

    def memory_dream(self, namespace: str) -> Json:
        return dict(self.post("/v1/memory/dream", {"namespace": namespace}))

    def memory_context(self, window_tokens: int, namespace: str) -> Json:
        """MEMORY.md and the pending notes (``context``), sized for a model's context window."""
        return dict(self.get("/v1/memory/context", window=window_tokens, namespace=namespace))

    def working_state(self, namespace: str = "default") -> Json:
        """MEMORY.md (``memory_md``) and the pending scratch notes (``notes``), each as stored."""
        return dict(self.get("/v1/memory/working", namespace=namespace))

    def directive_proposals(self, namespace: str = "default", status: str = "pending") -> Json:
        """Directives a dream proposed (``proposals``); ``status`` pending, adopted, dismissed or all."""
        return dict(self.get("/v1/memory/directives/proposals", namespace=namespace, status=status))

    def decide_directive(self, proposal_id: str, adopt: bool, namespace: str = "default") -> Json:
        """The user's answer to one proposal: adopt it as a directive (a note) or dismiss it."""
        return dict(self.post(f"/v1/memory/directives/proposals/{proposal_id}",
                              {"adopt": adopt, "namespace": namespace}))

    def working_versions(self, namespaces: Sequence[str], skills: bool = False) -> Json:
        """Versions (tags, not content) of each namespace's MEMORY.md and notes, and with
        ``skills`` of the skill index: ``{"namespaces": {ns: {"memory_md", "notes"}}, "skills"}``."""
        return dict(self.get("/v1/memory/working/versions", namespace=list(namespaces),
                             skills=str(skills).lower()))

    def crystallize_skill(self, crystal_id: str, text: str | None = None, category: str | None = None,
                          tags: Sequence[str] = ()) -> Json:
        """An emerging skill (a task pattern) as a skill crystal."""
        return dict(self.post(f"/v1/skills/{crystal_id}/crystallize",
                              {"text": text, "category": category, "tags": list(tags)}))

    # --- memory that learns (seed 003/004) ----------------------------------------------------
    def memory_feedback(self, crystal_id: str, verdict: str) -> Json:
        return dict(self.post("/v1/memory/feedback", {"id": crystal_id, "verdict": verdict}))

    def session_end(self) -> Json:
        return dict(self.post("/v1/memory/session/end", {}))

    def testament_export(self) -> Json:
        """A signed testament of this node's knowledge, its bytes base64 in ``testament_b64``."""
        return dict(self.post("/v1/memory/testament/export", {}))

    def testament_import(self, testament_b64: str) -> Json:
        return dict(self.post("/v1/memory/testament/import", {"testament_b64": testament_b64}))

    def budget_context(self, query: str, budget_tokens: int, working_memory: str | None = None,
                       sources: Sequence[str] = ()) -> Json:
        """Typed memory blocks for ``query`` within ``budget_tokens`` (only ``sources``, if given)."""
        return dict(self.post("/v1/memory/context/budget", _present({
            "query": query, "budget_tokens": budget_tokens, "working_memory": working_memory,
            "sources": list(sources) or None})))

    # --- skills and market --------------------------------------------------------------------
    def add_skill(self, text: str, *, scope: str, category: str | None = None, tags: Sequence[str] = (),
                  namespace: str | None = None) -> Json:
        """Store a skill (plain text or a SKILL.md bundle) as a skill crystal."""
        return dict(self.post("/v1/crystals", skill_body(text, scope=scope, category=category, tags=tags,
                                                         namespace=namespace)))

    def record_execution(self, crystal_id: str, success: bool, reward: float | None = None,
                         note: str | None = None) -> Json:
        """One run of a skill; on a bought skill (peer origin) it is also trust evidence about the seller."""
        return dict(self.post(f"/v1/skills/{crystal_id}/executions",
                              _present({"success": success, "reward": reward, "note": note})))

    def new_skill_version(self, crystal_id: str, text: str) -> Json:
        return dict(self.post(f"/v1/skills/{crystal_id}/versions", {"text": text}))

    def publish_skill(self, crystal_id: str, name: str | None = None, summary: str | None = None) -> Json:
        return dict(self.post(f"/v1/skills/{crystal_id}/publish", {"name": name, "summary": summary}))

    def publish_catalogue(self, crystal_ids: list[str] | None,
                          progress: Callable[[int, int, int], None] | None = None) -> Json:
        """Publish several skills (``crystal_ids``), or every listable one never listed (None),
        in calls of ``CATALOGUE_CHUNK``; ``progress(published, failed, remaining)`` after each."""
        published: list[Json] = []
        failed: list[Json] = []
        pending = list(crystal_ids or [])
        while True:
            body: Json = {"all": True} if crystal_ids is None else {"crystal_ids": pending[:CATALOGUE_CHUNK]}
            data = self.post("/v1/skills/publish", body | {"limit": CATALOGUE_CHUNK})
            published += data["published"]
            failed += data["failed"]
            pending = pending[CATALOGUE_CHUNK:]
            if progress is not None:
                progress(len(published), len(failed), data["remaining"])
            if not data["published"] or data["remaining"] == 0 or (crystal_ids is not None and not pending):
                break
        return {"published": published, "failed": failed}

    def withdraw_listing(self, listing_id: str) -> Json:
        return dict(self.post(f"/v1/listings/{listing_id}/withdraw", {}))

    def reprice_listing(self, listing_id: str, price_micro_usdc: int | None = None) -> Json:
        """Re-announce at a fixed price, or (None) at a fresh quote."""
        return dict(self.post(f"/v1/listings/{listing_id}/reprice", {"price_micro_usdc": price_micro_usdc}))

    def refresh_listings(self) -> Json:
        return dict(self.post("/v1/listings/refresh", {}))

    def endorse_listing(self, listing_id: str) -> Json:
        return dict(self.post(f"/v1/listings/{listing_id}/endorse", {}))

    def listings(self, category: str | None = None, max_price_micro_usdc: int | None = None,
                 tags: Sequence[str] = ()) -> list[shapes.Listing]:
        return cast("shapes.Listings", self.get("/v1/listings", category=category, max_price=max_price_micro_usdc,
                                         tag=list(tags) or None))["listings"]

    def search_listings(self, query: str, k: int = 10, category: str | None = None,
                        max_price_micro_usdc: int | None = None, tags: Sequence[str] = ()) -> list[shapes.Listing]:
        return cast("shapes.Listings", self.get("/v1/listings/search", q=query, k=k, category=category,
                                         max_price=max_price_micro_usdc, tag=list(tags) or None))["listings"]

    def market_stats(self) -> Json:
        return dict(self.get("/v1/market/stats"))

    def market_sync(self) -> Json:
        return dict(self.get("/v1/market/sync"))

    def buy(self, listing_id: str, max_price_micro_usdc: int | None = None, again: bool = False,
            exact: bool = False) -> Json:
        body: Json = {"listing_id": listing_id, "max_price_micro_usdc": max_price_micro_usdc,
                      "again": again}
        if exact:  # only when asked: a node from before vouchers refuses the unknown key
            body["exact"] = True
        return dict(self.post("/v1/purchases", body))

    def redeliver(self, listing_id: str) -> Json:
        return dict(self.post("/v1/purchases/redeliver", {"listing_id": listing_id}))

    def scan_skill(self, text: str, judge: bool = False) -> Json:
        body: dict[str, Any] = {"text": text}
        if judge:  # only when asked: a node from before the judge refuses the unknown key
            body["judge"] = True
        return dict(self.post("/v1/skills/scan", body))

    def release(self, listing_id: str) -> Json:
        return dict(self.post("/v1/purchases/release", {"listing_id": listing_id}))

    def warn_skill(self, target: str, reason: str) -> Json:
        return dict(self.post("/v1/skills/warnings", {"target": target, "reason": reason}))

    def skill_warnings(self) -> list[Json]:
        return list(self.get("/v1/skills/warnings")["warnings"])

    def purchases(self, limit: int) -> list[shapes.Purchase]:
        return cast("shapes.Purchases", self.get("/v1/purchases", limit=limit))["purchases"]

    def sales(self, limit: int) -> list[shapes.Sale]:
        return cast("shapes.Sales", self.get("/v1/sales", limit=limit))["sales"]

    def channels(self) -> Json:
        """Payment channels: those this node pays through and those that pay it."""
        return dict(self.get("/v1/wallet/channels"))

    def deposit(self, seller_key: str, amount_micro_usdc: int) -> Json:
        return dict(self.post("/v1/wallet/deposit", {"seller_key": seller_key,
                                                     "amount_micro_usdc": amount_micro_usdc}))

    def refund(self, channel_id: str) -> Json:
        return dict(self.post("/v1/wallet/refund", {"channel_id": channel_id}))

    def withdraw(self, channel_id: str) -> Json:
        """Start a channel's timed withdrawal, or finalize it once its delay has passed."""
        return dict(self.post("/v1/wallet/withdraw", {"channel_id": channel_id}))

    def claim(self) -> Json:
        """Claim every unclaimed voucher this node holds, now."""
        return dict(self.post("/v1/market/claim"))

    def wallet(self) -> Json:
        """Address, balances and today's spending against the cap."""
        return dict(self.get("/v1/wallet"))

    # --- bounties -----------------------------------------------------------------------------
    def post_bounty(self, text: str, reward_micro_usdc: int, ttl_s: int | None = None) -> Json:
        return dict(self.post("/v1/bounties", {"text": text, "reward_micro_usdc": reward_micro_usdc,
                                               "ttl_s": ttl_s}))

    def bounties(self, only_open: bool = False) -> list[Json]:
        return list(self.get("/v1/bounties", open="true" if only_open else None)["bounties"])

    def bounty(self, bounty_id: str) -> Json:
        return dict(self.get(f"/v1/bounties/{bounty_id}"))

    def fulfil_bounty(self, bounty_id: str, listing_id: str | None = None) -> Json:
        return dict(self.post(f"/v1/bounties/{bounty_id}/fulfil", {"listing_id": listing_id}))

    # --- trust --------------------------------------------------------------------------------
    def trust_rows(self) -> list[Json]:
        """Every peer this node has evidence about: local, global, level, last reason."""
        return list(self.get("/v1/trust")["peers"])

    # --- weather ------------------------------------------------------------------------------
    def weather(self) -> Json:
        return dict(self.get("/v1/weather"))

    def broadcast_weather(self, level: float, duration_s: int, reason: str) -> Json:
        return dict(self.post("/v1/weather/broadcast", {"level": level, "duration_s": duration_s,
                                                        "reason": reason}))

    # --- the operator's undo (each act in the audit log) --------------------------------------
    def lift_weather(self, reason: str = "") -> Json:
        """Management nodes: sign and gossip the early end of this node's alerts."""
        return dict(self.post("/v1/weather/lift", {"reason": reason}))

    def trust_ban(self, peer: str, reason: str = "") -> Json:
        """Ban a peer (peer id or hex key) by hand, until ``trust_unban``."""
        return dict(self.post("/v1/trust/ban", {"peer": peer, "reason": reason}))

    def trust_unban(self, peer: str, reason: str = "") -> Json:
        return dict(self.post("/v1/trust/unban", {"peer": peer, "reason": reason}))

    def revoke_endorsement(self, listing_id: str, reason: str = "") -> Json:
        """Management nodes: withdraw this node's endorsement of a listing, on every node."""
        return dict(self.post(f"/v1/listings/{listing_id}/endorse/revoke", {"reason": reason}))

    def audit(self, limit: int = 100) -> list[Json]:
        """The newest operator acts (oldest first)."""
        return list(self.get("/v1/audit", limit=limit)["entries"])


def api_base_url(config: NodeConfig) -> str | None:
    try:
        port = int(config.api_port_path.read_text().strip())
    except (OSError, ValueError):
        return None
    return f"http://{config.api.host}:{port}"


def running_node(config: NodeConfig, timeout_s: float = 60.0) -> ApiClient | None:
    """A client for the node on this data dir if its process is alive, else None."""
    try:
        pid = int(config.pid_path.read_text().strip())
    except (OSError, ValueError):
        return None
    if not pid_alive(pid):
        return None
    base = api_base_url(config)
    if base is None:
        return None
    token = read_secret(config.api_token_path).decode().strip()
    return ApiClient(base, token, timeout_s)
